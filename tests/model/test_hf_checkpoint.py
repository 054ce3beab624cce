"""HF safetensors import/export: bit-exact round trips through transformers, clear errors."""

from __future__ import annotations

import json
import shutil

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from safetensors.numpy import load_file, save_file

from deepswe_jax.model import hf_tensor_stream, load_hf_checkpoint, save_hf_checkpoint
from deepswe_jax.parallel import make_mesh


def assert_same_weights(original: torch.nn.Module, directory) -> None:
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(directory)
    expected, got = original.state_dict(), reloaded.state_dict()
    assert set(got) == set(expected)
    for name, tensor in expected.items():
        assert got[name].dtype == tensor.dtype, name
        assert torch.equal(got[name], tensor), name


@pytest.mark.parametrize("max_shard_bytes", [5 * 1024**3, 20_000], ids=["one_file", "sharded"])
def test_round_trip_is_bit_identical(tiny_hf, tmp_path, max_shard_bytes):
    directory, hf_model = tiny_hf
    exported = tmp_path / "exported"
    save_hf_checkpoint(load_hf_checkpoint(directory), exported, max_shard_bytes=max_shard_bytes)
    files = sorted(p.name for p in exported.iterdir())
    if max_shard_bytes == 20_000:
        index = json.loads((exported / "model.safetensors.index.json").read_text())
        shards = sorted(set(index["weight_map"].values()))
        assert len(shards) > 2 and set(shards) <= set(files)
    else:
        assert "model.safetensors" in files and "model.safetensors.index.json" not in files
    assert {"config.json", "generation_config.json"} <= set(files)
    generation = json.loads((exported / "generation_config.json").read_text())
    assert generation["eos_token_id"] == 2
    assert_same_weights(hf_model, exported)
    # ... and our own loader reads the sharded export back.
    assert load_hf_checkpoint(exported).config == load_hf_checkpoint(directory).config


def test_bfloat16_round_trip(tmp_path, make_tiny_hf):
    source, exported = tmp_path / "source", tmp_path / "exported"
    hf_model = make_tiny_hf(source, tied=False, dtype=torch.bfloat16)
    model = load_hf_checkpoint(source, dtype=jnp.bfloat16)
    assert model.layers.q_proj.dtype == jnp.bfloat16
    save_hf_checkpoint(model, exported)
    assert json.loads((exported / "config.json").read_text())["dtype"] == "bfloat16"
    assert_same_weights(hf_model, exported)


def test_tensor_stream_uses_hf_names_and_layouts(tiny_hf):
    directory, hf_model = tiny_hf
    expected = {name: t.numpy() for name, t in hf_model.state_dict().items()}
    if hf_model.config.tie_word_embeddings:
        expected.pop("lm_head.weight")
    streamed = dict(hf_tensor_stream(load_hf_checkpoint(directory)))
    assert list(streamed) == list(dict(hf_tensor_stream(load_hf_checkpoint(directory))))
    assert set(streamed) == set(expected)
    for name, tensor in streamed.items():
        np.testing.assert_array_equal(tensor, expected[name], err_msg=name)


def test_other_architecture_is_rejected(tmp_path):
    directory = tmp_path / "llama"
    directory.mkdir()
    (directory / "config.json").write_text(
        json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama"})
    )
    with pytest.raises(
        ValueError, match=r"llama/config.json: model_type='llama'.*LlamaForCausalLM"
    ):
        load_hf_checkpoint(directory)


def test_missing_shard_is_named(tmp_path, make_tiny_hf):
    source, exported = tmp_path / "source", tmp_path / "exported"
    make_tiny_hf(source, tied=True)
    shutil.copytree(source, exported)
    save_hf_checkpoint(load_hf_checkpoint(source), exported, max_shard_bytes=20_000)
    (exported / "model-00002-of-00007.safetensors").unlink()
    with pytest.raises(
        FileNotFoundError, match=r"model-00002-of-00007.safetensors not found.*index"
    ):
        load_hf_checkpoint(exported)


def test_wrong_tensor_shape_is_named(tmp_path, make_tiny_hf):
    directory = tmp_path / "hf"
    make_tiny_hf(directory, tied=True)
    weights = load_file(directory / "model.safetensors")
    weights["model.layers.1.self_attn.k_proj.weight"] = np.zeros((16, 32), np.float32)
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        ValueError,
        match=r"model.safetensors: tensor model.layers.1.self_attn.k_proj.weight has shape "
        r"\(16, 32\), but config.json implies \(32, 32\)",
    ):
        load_hf_checkpoint(directory)


def test_missing_and_unknown_tensors_are_named(tmp_path, make_tiny_hf):
    directory = tmp_path / "hf"
    make_tiny_hf(directory, tied=True)
    weights = load_file(directory / "model.safetensors")
    del weights["model.norm.weight"]
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(KeyError, match="tensor model.norm.weight missing"):
        load_hf_checkpoint(directory)
    weights["model.norm.weight"] = np.ones(32, ml_dtypes.bfloat16)
    weights["model.layers.0.self_attn.q_proj.bias"] = np.zeros(64, np.float32)
    save_file(weights, directory / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"q_proj.bias.*not part of a Qwen3 model"):
        load_hf_checkpoint(directory)


def test_load_places_parameters_with_their_sharding(tiny_hf):
    directory, hf_model = tiny_hf
    mesh = make_mesh(data=2, fsdp=2, tensor=2)
    model = load_hf_checkpoint(directory, mesh=mesh)
    q_proj = model.layers.q_proj.get_value()
    assert q_proj.sharding == NamedSharding(mesh, P(None, "fsdp", "tensor"))
    assert q_proj.addressable_shards[0].data.shape == (2, 16, 2, 16)
    assert model.embed_tokens.get_value().sharding.spec == P("tensor", "fsdp")
    ids = np.random.default_rng(0).integers(0, 128, (2, 10))
    with torch.no_grad():
        expected = hf_model(torch.tensor(ids)).logits.numpy()
    with jax.set_mesh(mesh):
        logits = nnx.jit(lambda m, x: m(x))(model, jnp.asarray(ids))
    np.testing.assert_allclose(logits, expected, atol=1e-4, rtol=0)
