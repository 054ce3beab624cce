"""The JAX -> HF-named tensor stream a vLLM engine loads equals what save_hf_checkpoint writes,
from two jitted programs however many layers and syncs."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx
from safetensors.numpy import load_file

from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, save_hf_checkpoint
from deepswe_jax.parallel import make_mesh, shard_model
from deepswe_jax.sampling.weight_stream import HFWeightExtractor, jax_to_torch, local_bytes

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
def test_extracted_stream_equals_saved_checkpoint_from_two_programs(tmp_path, tie_word_embeddings):
    config = dataclasses.replace(CONFIG, tie_word_embeddings=tie_word_embeddings)
    model = shard_model(Qwen3ForCausalLM(config, rngs=nnx.Rngs(0)), make_mesh(fsdp=4, tensor=2))
    save_hf_checkpoint(model, tmp_path)
    saved = load_file(tmp_path / "model.safetensors")

    graphdef, params = nnx.split(model, nnx.Param)
    extractor = HFWeightExtractor(graphdef, config, jnp.float32, untie=True)
    streamed = list(extractor.stream(params))
    names = [name for name, _ in streamed]
    expected = list(saved) if not tie_word_embeddings else [*saved, "lm_head.weight"]
    assert sorted(names) == sorted(expected) and len(names) == len(set(names))
    assert names == list(extractor.hf_shapes())  # save_hf_checkpoint's order
    for name, array in streamed:
        assert array.sharding.is_fully_replicated, name
        hf_name = (
            "model.embed_tokens.weight"
            if name == "lm_head.weight" and tie_word_embeddings
            else name
        )
        tensor = jax_to_torch(array)
        assert tuple(tensor.shape) == saved[hf_name].shape, name
        np.testing.assert_array_equal(tensor.numpy(), saved[hf_name], err_msg=name)
    assert extractor.hf_bytes() == sum(a.nbytes for _, a in streamed)

    bf16 = HFWeightExtractor(graphdef, config, jnp.bfloat16)
    for _ in range(2):  # a second sync reuses both programs
        assert all(a.dtype == jnp.bfloat16 for _, a in bf16.stream(params))
    assert bf16.compilation_count == 2  # top-level tensors + one layer (index is an argument)
    assert local_bytes(streamed[0][1]) == 8 * streamed[0][1].nbytes  # whole on each device


def test_jax_to_torch_shares_single_device_and_replicated_buffers():
    array = jnp.arange(12, dtype=jnp.bfloat16).reshape(3, 4)
    tensor = jax_to_torch(array)
    assert tensor.dtype == torch.bfloat16
    assert tensor.data_ptr() == array.unsafe_buffer_pointer()  # no copy
    mesh = make_mesh(fsdp=8)
    replicated = jax.device_put(jnp.arange(6.0), jax.sharding.NamedSharding(mesh, jax.P()))
    shared = jax_to_torch(replicated)
    assert shared.data_ptr() == replicated.addressable_shards[0].data.unsafe_buffer_pointer()
    sharded = jax.device_put(
        jnp.arange(64.0).reshape(8, 8), jax.sharding.NamedSharding(mesh, jax.P("fsdp"))
    )
    np.testing.assert_array_equal(jax_to_torch(sharded).numpy(), np.arange(64.0).reshape(8, 8))
