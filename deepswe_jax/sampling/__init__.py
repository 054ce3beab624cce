"""Token generation for the agent loop: the `Sampler` protocol and its implementations.

`JaxSampler` (embedded default: continuous batching in this process), `VLLMSampler` (an
in-process vLLM engine, GPU or CPU build, with weights streamed from JAX), `ScriptedSampler`
(fixed token scripts, for tests).

base                 the Sampler protocol: GenerateRequest, SamplingParams, Completion
jax_sampler          JaxSampler: continuous batching over a fixed-shape KV cache, on a mesh
sequences            a request in flight inside JaxSampler, its answer, shape buckets
slots                JaxSampler's host record of its cache rows (request, next token)
decoding             JaxSampler's device kernels: token sampling, prefill, extend, decode
prefix_cache         which tokens each cache row holds; where a new prompt reuses them
memory               what a JaxSampler holds per device (weights, KV cache) before allocating
vllm_sampler         VLLMSampler: an in-process vLLM engine fed the trainer's weights
vllm_engine          building that engine and pushing weights into it
weight_stream        the trainer's weights for an inference engine, HF names, layer by layer
checkpoint_follower  a sampler process serving the trainer's newest Orbax checkpoint
scripted             ScriptedSampler: fixed token sequences (tests, scripted policies)
"""

from deepswe_jax.sampling.base import Completion, GenerateRequest, Sampler, SamplingParams
from deepswe_jax.sampling.decoding import sample_next_tokens
from deepswe_jax.sampling.jax_sampler import JaxSampler
from deepswe_jax.sampling.scripted import ScriptedSampler
from deepswe_jax.sampling.vllm_sampler import VLLMSampler

__all__ = [
    "Completion",
    "GenerateRequest",
    "JaxSampler",
    "Sampler",
    "SamplingParams",
    "ScriptedSampler",
    "VLLMSampler",
    "sample_next_tokens",
]
