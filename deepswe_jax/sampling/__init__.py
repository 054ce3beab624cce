"""Token generation for the agent loop: the `Sampler` protocol and its implementations.

`JaxSampler` (embedded default: continuous batching in this process), `VLLMSampler` (an
in-process vLLM engine, GPU or CPU build, with weights streamed from JAX), `ScriptedSampler`
(fixed token scripts, for tests).
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
