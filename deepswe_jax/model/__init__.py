"""Qwen3 policy: config, Flax NNX model with KV cache, HF safetensors import/export.

config     Qwen3Config: the architecture, with HF config.json's field names
qwen3      Qwen3ForCausalLM: scanned layers, named remat policies, functional KV cache
attention  causal attention over whole sequences, one function per kernel (xla/cudnn/pallas)
kv_cache   the KV caches of incremental decoding: dense rows, or pages named by a page table
cache_attention  a decode step's attention over either cache
paged_kernel  the same over a paged cache in one Pallas kernel (GPU; interpret mode on CPU)
lora       LoRA adapters on the stacked projection kernels
hf_io      HF safetensors <-> Qwen3ForCausalLM, one tensor at a time
"""

from deepswe_jax.model.config import Qwen3Config
from deepswe_jax.model.hf_io import (
    hf_shapes,
    hf_tensor_stream,
    load_hf_checkpoint,
    save_hf_checkpoint,
)
from deepswe_jax.model.kv_cache import KVCache, PagedKVCache
from deepswe_jax.model.qwen3 import REMAT_POLICIES, Qwen3ForCausalLM, remat_policy

__all__ = [
    "REMAT_POLICIES",
    "KVCache",
    "PagedKVCache",
    "Qwen3Config",
    "Qwen3ForCausalLM",
    "hf_shapes",
    "hf_tensor_stream",
    "load_hf_checkpoint",
    "remat_policy",
    "save_hf_checkpoint",
]
