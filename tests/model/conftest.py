"""Tiny random transformers Qwen3 models saved with save_pretrained, for parity and I/O tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import transformers

TINY_HF_CONFIG = dict(
    vocab_size=128,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,  # grouped-query attention
    head_dim=16,  # != hidden_size / num_attention_heads
    rope_parameters={"rope_type": "default", "rope_theta": 10_000.0},
    rms_norm_eps=1e-6,
    max_position_embeddings=256,
    bos_token_id=1,
    eos_token_id=2,
)


def save_tiny_hf_model(
    directory: Path, *, tied: bool, seed: int = 0, dtype: torch.dtype = torch.float32, **overrides
) -> transformers.Qwen3ForCausalLM:
    """Random tiny Qwen3 (norm weights perturbed so a mis-mapped norm shows) saved to directory."""
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(**{**TINY_HF_CONFIG, **overrides}, tie_word_embeddings=tied)
    model = transformers.Qwen3ForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "norm" in name:
                param.copy_(1.0 + 0.2 * torch.randn_like(param))
    model = model.to(dtype)
    model.save_pretrained(directory)
    return model


@pytest.fixture
def make_tiny_hf():
    """``save_tiny_hf_model`` itself (test modules cannot import conftest reliably)."""
    return save_tiny_hf_model


@pytest.fixture(params=[False, True], ids=["untied", "tied"])
def tiny_hf(request, tmp_path) -> tuple[Path, transformers.Qwen3ForCausalLM]:
    """(directory, torch model) of a saved tiny Qwen3, untied and tied lm head."""
    directory = tmp_path / "hf"
    return directory, save_tiny_hf_model(directory, tied=request.param)
