"""The JAX -> HF-named tensor stream a vLLM engine loads equals what save_hf_checkpoint writes."""

import dataclasses
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from safetensors.numpy import load_file

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, hf_tensor_stream, save_hf_checkpoint
from deepswe_jax.parallel import make_mesh, shard_model
from deepswe_jax.sampling.weight_stream import (
    bucket_named_tensors,
    jax_to_torch,
    torch_weight_buckets,
)

CONFIG = Qwen3Config(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=8,
)


@pytest.mark.parametrize("tie_word_embeddings", [False, True])
def test_bucketed_torch_stream_equals_saved_checkpoint(tmp_path, tie_word_embeddings):
    config = dataclasses.replace(CONFIG, tie_word_embeddings=tie_word_embeddings)
    model = shard_model(Qwen3ForCausalLM(config, rngs=nnx.Rngs(0)), make_mesh(fsdp=4, tensor=2))
    save_hf_checkpoint(model, tmp_path)
    saved = load_file(tmp_path / "model.safetensors")

    max_bucket_bytes = 20_000  # embeddings (16 KiB) fit; several layer tensors share a bucket
    buckets = list(
        torch_weight_buckets(
            hf_tensor_stream(model, to_host=False), max_bucket_bytes=max_bucket_bytes
        )
    )
    streamed = [pair for bucket in buckets for pair in bucket]
    names = [name for name, _ in streamed]
    assert sorted(names) == sorted(saved) and len(names) == len(set(names))
    for name, tensor in streamed:
        assert isinstance(tensor, torch.Tensor)
        assert tuple(tensor.shape) == saved[name].shape, name
        assert str(tensor.dtype) == f"torch.{saved[name].dtype}", name
        np.testing.assert_array_equal(tensor.numpy(), saved[name], err_msg=name)
    assert len(buckets) > 1
    for bucket in buckets:
        assert sum(t.nbytes for _, t in bucket) <= max_bucket_bytes or len(bucket) == 1


def test_bucket_named_tensors_keeps_order_and_isolates_oversized_tensors():
    tensors = [(f"t{i}", np.zeros(n, np.float32)) for i, n in enumerate([10, 10, 10, 100, 5, 5])]
    buckets = list(bucket_named_tensors(tensors, max_bucket_bytes=80))
    assert [[name for name, _ in bucket] for bucket in buckets] == [
        ["t0", "t1"],
        ["t2"],
        ["t3"],
        ["t4", "t5"],
    ]
    with pytest.raises(ValueError, match="positive"):
        list(bucket_named_tensors(tensors, max_bucket_bytes=0))


def test_jax_to_torch_shares_single_device_buffers():
    array = jnp.arange(12, dtype=jnp.bfloat16).reshape(3, 4)
    tensor = jax_to_torch(array)
    assert tensor.dtype == torch.bfloat16
    assert tensor.data_ptr() == array.unsafe_buffer_pointer()  # no copy
    sharded = jax.device_put(
        jnp.arange(64.0).reshape(8, 8),
        jax.sharding.NamedSharding(make_mesh(fsdp=8), jax.P("fsdp")),
    )
    np.testing.assert_array_equal(jax_to_torch(sharded).numpy(), np.arange(64.0).reshape(8, 8))


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None,
    reason="vLLM is not installed (GPU hosts only: pip install -e '.[vllm]')",
)
def test_vllm_sampler_samples_synced_weights(tmp_path):
    import asyncio

    from deepswe_jax.sampling import GenerateRequest, SamplingParams, VLLMSampler

    config = dataclasses.replace(CONFIG, initializer_range=0.5)
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(0))
    save_hf_checkpoint(model, tmp_path)
    sampler = VLLMSampler(model, str(tmp_path), max_model_len=64, dtype=jnp.float32)
    prompt = (1, 2, 3, 4, 5)
    request = GenerateRequest(prompt, SamplingParams(temperature=0.0, max_new_tokens=8))
    with pytest.raises(RuntimeError, match="sync_weights"):
        asyncio.run(sampler.generate([request]))
    sampler.sync_weights(nnx.state(model))
    [completion] = asyncio.run(sampler.generate([request]))
    sampler.close()
    logits = model(jnp.array([list(prompt) + list(completion.token_ids)]))[0]
    greedy = jnp.argmax(logits[len(prompt) - 1 : -1], axis=-1)
    assert list(completion.token_ids) == greedy.tolist()
