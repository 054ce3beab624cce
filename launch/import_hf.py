"""Convert a Hugging Face Qwen3 directory (safetensors) into an Orbax parameters checkpoint.

  python launch/import_hf.py --hf_dir=/ckpt/Qwen3-32B --out=/ckpt/qwen3_32b_orbax \
      [--config=configs/deepswe_qwen3_32b.py]   # mesh, sharding rules and param dtype

The output is usable as `config.init_from` and converts back with launch/export_hf.py.
"""

import json
import os
import sys

# Run as a script (python launch/import_hf.py) the repository root, where configs/ lives, is not on
# sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

import jax.numpy as jnp  # noqa: E402
from absl import flags  # noqa: E402
from flax import nnx  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.checkpoint import save_params  # noqa: E402
from deepswe_jax.experiment import device_mesh, sharding_rules  # noqa: E402
from deepswe_jax.model import load_hf_checkpoint  # noqa: E402
from deepswe_jax.parallel import DEFAULT_RULES, make_mesh  # noqa: E402

_HF_DIR = flags.DEFINE_string("hf_dir", None, "HF model directory (config.json + safetensors).")
_OUT = flags.DEFINE_string("out", None, "New directory for the Orbax checkpoint.")
_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "Optional experiment config: its mesh, sharding_rules and param_dtype are used."
)


def hf_dtype(hf_dir: str) -> str:
    """The dtype the HF weights are stored in, per config.json ('float32' when unstated)."""
    with open(os.path.join(hf_dir, "config.json")) as f:
        hf = json.load(f)
    return str(hf.get("dtype") or hf.get("torch_dtype") or "float32")


def main(argv: list[str]) -> None:
    del argv
    config = _CONFIG.value
    if config is None:
        mesh, rules, param_dtype = make_mesh(), DEFAULT_RULES, "float32"
    else:
        mesh, rules, param_dtype = device_mesh(config), sharding_rules(config), config.param_dtype
    model = load_hf_checkpoint(_HF_DIR.value, dtype=jnp.dtype(param_dtype), mesh=mesh, rules=rules)
    # Recording the source dtype lets export_hf write the weights back exactly as they came.
    model_config = model.config.to_hf_dict(dtype=hf_dtype(_HF_DIR.value))
    save_params(_OUT.value, nnx.state(model, nnx.Param), model_config=model_config)
    print(f"wrote {_OUT.value}: {model.config.num_parameters:,} parameters ({param_dtype})")


if __name__ == "__main__":
    flags.mark_flags_as_required(["hf_dir", "out"])
    cli.run(main)
