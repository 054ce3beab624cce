"""Qwen3 architecture hyperparameters, with the field names of HF's ``config.json``."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

QWEN3_ARCHITECTURE = "Qwen3ForCausalLM"
QWEN3_MODEL_TYPE = "qwen3"


@dataclasses.dataclass(frozen=True)
class Qwen3Config:
    """Qwen3 dense decoder hyperparameters (HF ``Qwen3Config`` field names)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: int = 40_960
    initializer_range: float = 0.02
    bos_token_id: int | None = None
    eos_token_id: int | tuple[int, ...] | None = None
    pad_token_id: int | None = None

    def __post_init__(self) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must be a multiple of "
                f"num_key_value_heads={self.num_key_value_heads}"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary embeddings")
        if isinstance(self.eos_token_id, list):
            object.__setattr__(self, "eos_token_id", tuple(self.eos_token_id))

    @property
    def num_parameters(self) -> int:
        """Total parameter count (embedding counted once when tied)."""
        e, m, d = self.hidden_size, self.intermediate_size, self.head_dim
        q, kv = self.num_attention_heads * d, self.num_key_value_heads * d
        per_layer = e * (q + 2 * kv) + q * e + 3 * e * m + 2 * e + 2 * d
        embed = self.vocab_size * e * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * per_layer + embed + e

    def kv_bytes_per_token(self, dtype_bytes: int, tensor_parallel: int = 1) -> int:
        """Bytes of keys and values one token occupies in every layer, at `dtype_bytes` per
        element, on one device of `tensor_parallel` devices that split the key and value heads
        (a device holds at least one head: heads are replicated when there are fewer)."""
        heads = -(-self.num_key_value_heads // tensor_parallel)
        return 2 * self.num_hidden_layers * heads * self.head_dim * dtype_bytes

    @classmethod
    def from_hf_dict(cls, hf: dict[str, Any], source: str = "config") -> Qwen3Config:
        """Build from a parsed HF ``config.json``; ``source`` names the file in error messages.

        Accepts both the transformers<5 layout (top-level ``rope_theta``) and the >=5 layout
        (``rope_parameters``); a dict without ``model_type``/``architectures`` (e.g.
        ``config.model`` of an ml_collections config) is taken as Qwen3. Rejects other architectures and features this model does not
        implement (attention bias, sliding window, rope scaling) instead of silently ignoring them.
        """
        model_type = hf.get("model_type", QWEN3_MODEL_TYPE)
        architectures = hf.get("architectures") or [QWEN3_ARCHITECTURE]
        if model_type != QWEN3_MODEL_TYPE or QWEN3_ARCHITECTURE not in architectures:
            raise ValueError(
                f"{source}: model_type={model_type!r} architectures={architectures} is not a dense "
                f"Qwen3 model; this loader supports model_type='qwen3' with architecture "
                f"{QWEN3_ARCHITECTURE} only (convert the checkpoint or pick a Qwen3 model)"
            )
        unsupported = []
        if hf.get("attention_bias"):
            unsupported.append("attention_bias=true")
        if hf.get("use_sliding_window"):
            unsupported.append("use_sliding_window=true")
        if hf.get("hidden_act", "silu") != "silu":
            unsupported.append(f"hidden_act={hf['hidden_act']!r}")
        rope = hf.get("rope_parameters") or {}
        rope_scaling = hf.get("rope_scaling") or {}
        rope_type = rope.get("rope_type") or rope_scaling.get("rope_type") or "default"
        if rope_type != "default":
            unsupported.append(f"rope_type={rope_type!r}")
        if unsupported:
            raise ValueError(
                f"{source}: unsupported Qwen3 options {', '.join(unsupported)}; "
                "only plain full attention with default RoPE is implemented"
            )
        rope_theta = rope.get("rope_theta", hf.get("rope_theta", cls.rope_theta))
        num_heads = hf["num_attention_heads"]
        try:
            return cls(
                vocab_size=hf["vocab_size"],
                hidden_size=hf["hidden_size"],
                intermediate_size=hf["intermediate_size"],
                num_hidden_layers=hf["num_hidden_layers"],
                num_attention_heads=num_heads,
                num_key_value_heads=hf.get("num_key_value_heads") or num_heads,
                head_dim=hf.get("head_dim") or hf["hidden_size"] // num_heads,
                rope_theta=float(rope_theta),
                rms_norm_eps=float(hf.get("rms_norm_eps", cls.rms_norm_eps)),
                tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
                max_position_embeddings=hf.get(
                    "max_position_embeddings", cls.max_position_embeddings
                ),
                initializer_range=hf.get("initializer_range", cls.initializer_range),
                bos_token_id=hf.get("bos_token_id"),
                eos_token_id=hf.get("eos_token_id"),
                pad_token_id=hf.get("pad_token_id"),
            )
        except KeyError as missing:
            raise ValueError(f"{source}: required Qwen3 field {missing} is missing") from None

    @classmethod
    def from_json_file(cls, path: str | os.PathLike) -> Qwen3Config:
        """Read an HF ``config.json`` (or a directory holding one)."""
        path = os.fspath(path)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found; expected an HF model directory")
        with open(path) as f:
            return cls.from_hf_dict(json.load(f), source=path)

    def to_hf_dict(self, dtype: str = "float32") -> dict[str, Any]:
        """HF ``config.json`` contents, readable by transformers 4.x and 5.x and by vLLM."""
        return {
            "architectures": [QWEN3_ARCHITECTURE],
            "model_type": QWEN3_MODEL_TYPE,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "attention_bias": False,
            "attention_dropout": 0.0,
            "rope_theta": self.rope_theta,
            "rope_scaling": None,
            "rope_parameters": {"rope_type": "default", "rope_theta": self.rope_theta},
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "initializer_range": self.initializer_range,
            "use_sliding_window": False,
            "sliding_window": None,
            "max_window_layers": self.num_hidden_layers,
            "use_cache": True,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": list(self.eos_token_id)
            if isinstance(self.eos_token_id, tuple)
            else self.eos_token_id,
            "pad_token_id": self.pad_token_id,
            "torch_dtype": dtype,
            "dtype": dtype,
        }
