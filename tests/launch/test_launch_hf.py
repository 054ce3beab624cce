"""launch/import_hf.py -> launch/export_hf.py reproduces an HF checkpoint bit for bit."""

import glob
import json
import os
import subprocess
import sys

import pytest
import torch
import transformers
from safetensors import safe_open

from tests.cpu_devices import xla_flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _save_random_qwen3(directory, *, tied: bool, dtype: torch.dtype) -> None:
    config = transformers.Qwen3Config(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=tied,
        max_position_embeddings=512,
        rope_theta=1_000_000.0,
    )
    torch.manual_seed(0)
    model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()  # norms too: ones would hide layout mistakes
    model.to(dtype).save_pretrained(directory)


def _tensors(directory) -> dict[str, torch.Tensor]:
    tensors = {}
    for path in glob.glob(os.path.join(directory, "*.safetensors")):
        with safe_open(path, "pt") as f:
            tensors.update({name: f.get_tensor(name) for name in f.keys()})
    return tensors


def _launch(module: str, *flags: str) -> None:
    env = dict(os.environ, XLA_FLAGS=xla_flags(4))
    result = subprocess.run(
        [sys.executable, "-m", module, *flags],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize(
    "tied, dtype, max_shard_bytes",
    [(False, torch.float32, 5 * 1024**3), (True, torch.bfloat16, 20_000)],
    ids=["untied-fp32-one-file", "tied-bf16-sharded"],
)
def test_import_export_round_trip_is_bit_identical(tmp_path, tied, dtype, max_shard_bytes):
    hf_dir, orbax_dir, out_dir = tmp_path / "hf", tmp_path / "orbax", tmp_path / "out"
    _save_random_qwen3(hf_dir, tied=tied, dtype=dtype)
    _launch("launch.import_hf", f"--hf_dir={hf_dir}", f"--out={orbax_dir}")
    _launch(
        "launch.export_hf",
        f"--ckpt={orbax_dir}",
        f"--out={out_dir}",
        f"--max_shard_bytes={max_shard_bytes}",
    )

    original, exported = _tensors(hf_dir), _tensors(out_dir)
    assert sorted(exported) == sorted(original)
    for name, tensor in original.items():
        assert exported[name].dtype == tensor.dtype, name
        assert torch.equal(exported[name], tensor), name
    if max_shard_bytes < 100_000:
        assert len(glob.glob(str(out_dir / "*.safetensors"))) > 1
        assert os.path.exists(out_dir / "model.safetensors.index.json")

    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out_dir)
    with open(hf_dir / "config.json") as f:
        source_config = json.load(f)
    for field in ("hidden_size", "num_hidden_layers", "num_key_value_heads", "tie_word_embeddings"):
        assert getattr(reloaded.config, field) == source_config[field]
    assert reloaded.config.rope_parameters["rope_theta"] == 1_000_000.0


def test_export_names_the_fix_for_a_missing_checkpoint(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "launch.export_hf", f"--ckpt={tmp_path}", f"--out={tmp_path}/o"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "launch.import_hf" in result.stderr


def test_export_refuses_a_tokenizer_without_a_chat_template_before_any_work(tmp_path):
    """`vllm serve` of the output could not serve chat completions (mini-swe-agent's calls)."""
    tokenizer = tmp_path / "tokenizer"
    tokenizer.mkdir()
    (tokenizer / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>"}))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "launch.export_hf",
            f"--ckpt={tmp_path}/missing",
            f"--out={tmp_path}/o",
            f"--tokenizer={tokenizer}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "has no chat template" in result.stderr
    assert not os.path.exists(tmp_path / "o")
