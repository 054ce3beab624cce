"""Convert an Orbax checkpoint (import_hf output or a training run's checkpoint dir) to HF.

  python launch/export_hf.py --ckpt=runs/deepswe/checkpoints --out=/ckpt/deepswe_step200 \
      [--max_shard_bytes=5000000000] [--dtype=bfloat16] [--config=configs/deepswe_qwen3_32b.py] \
      [--tokenizer=/ckpt/Qwen3-32B]

A training checkpoint directory exports its latest finished step. The output loads with
`transformers.AutoModelForCausalLM.from_pretrained` and vLLM; with --tokenizer (the run's
config.tokenizer) it also holds the tokenizer and its chat template, so `vllm serve <out>` serves
chat completions (README: "Evaluating an exported checkpoint with mini-swe-agent").
"""

import json
import os
import shutil
import sys

# Run as a script (python launch/export_hf.py) the repository root, where configs/ lives, is not on
# sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

import jax.numpy as jnp  # noqa: E402
from absl import flags  # noqa: E402
from flax import nnx  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.checkpoint import (  # noqa: E402
    read_model_config,
    restore_params,
    restore_target,
)
from deepswe_jax.experiment import device_mesh, sharding_rules  # noqa: E402
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, save_hf_checkpoint  # noqa: E402
from deepswe_jax.parallel import DEFAULT_RULES, make_mesh, state_shardings  # noqa: E402

_CKPT = flags.DEFINE_string("ckpt", None, "Orbax parameters directory or training checkpoint dir.")
_OUT = flags.DEFINE_string("out", None, "Output HF directory.")
_MAX_SHARD_BYTES = flags.DEFINE_integer(
    "max_shard_bytes",
    5 * 1024**3,
    "Largest safetensors file; more weights are split with an index.",
)
_DTYPE = flags.DEFINE_string(
    "dtype", None, "Output dtype (default: the dtype of the HF weights the run started from)."
)
_TOKENIZER = flags.DEFINE_string(
    "tokenizer",
    None,
    "HF tokenizer directory (tokenizer.json, tokenizer_config.json with a chat template) to copy "
    "into --out.",
)
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Optional experiment config: its mesh and sharding_rules are used."
)
# What a HF tokenizer directory may hold (Qwen3's has the first four).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
)


def tokenizer_files(source: str) -> list[str]:
    """The tokenizer files of `source`; refuses a tokenizer without a chat template, which an
    OpenAI-compatible server needs for chat completions."""
    present = [name for name in TOKENIZER_FILES if os.path.isfile(os.path.join(source, name))]
    if "tokenizer_config.json" not in present:
        raise FileNotFoundError(
            f"no tokenizer_config.json in --tokenizer={source}; point it at a HF tokenizer "
            "directory (the run's config.tokenizer, e.g. a Qwen3 checkpoint)"
        )
    with open(os.path.join(source, "tokenizer_config.json")) as f:
        has_template = "chat_template" in json.load(f)
    if not has_template and "chat_template.jinja" not in present:
        raise ValueError(
            f"the tokenizer in {source} has no chat template (tokenizer_config.json's "
            "chat_template or chat_template.jinja); use the Qwen3 tokenizer the run trained with"
        )
    return present


def main(argv: list[str]) -> None:
    del argv
    config = _CONFIG.value
    if config is None:
        mesh, rules = make_mesh(), DEFAULT_RULES
    else:
        mesh, rules = device_mesh(config), sharding_rules(config)
    tokenizer = tokenizer_files(_TOKENIZER.value) if _TOKENIZER.value else []
    saved_config = read_model_config(_CKPT.value)  # a damaged newest step falls back
    model_config = Qwen3Config.from_hf_dict(saved_config, source=_CKPT.value)
    abstract = nnx.eval_shape(lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0)))
    graphdef, abstract_params = nnx.split(abstract, nnx.Param)
    target = restore_target(abstract_params, state_shardings(abstract_params, mesh, rules))
    model = nnx.merge(graphdef, restore_params(_CKPT.value, target))
    dtype = jnp.dtype(_DTYPE.value or saved_config.get("dtype") or "float32")
    save_hf_checkpoint(model, _OUT.value, max_shard_bytes=_MAX_SHARD_BYTES.value, dtype=dtype)
    for name in tokenizer:
        shutil.copyfile(os.path.join(_TOKENIZER.value, name), os.path.join(_OUT.value, name))
    print(f"wrote {_OUT.value} from {_CKPT.value} ({dtype.name})")


if __name__ == "__main__":
    flags.mark_flags_as_required(["ckpt", "out"])
    cli.run(main)
