"""Bytes per device for training a config on a mesh, before touching any accelerator.

  python launch/plan_memory.py --config=configs/deepswe_qwen3_32b.py --num_devices=64 \
      --device_memory_gb=80 [--mesh=1x8x8] [--config.remat=save_dots]

With --sampler, the sampler of config.sampler.kind instead. 'vllm': the engines serving the
policy (weights, activations, and the KV cache of config.sampler.max_batch sequences at full
length in blocks of 16 tokens, beside the blocks the budget leaves room for; against
config.sampler.gpu_memory_utilization of each device). 'jax': the in-process JaxSampler's
weights and KV cache on config.mesh: with config.sampler.paged, its pool of 16-token pages
(config.sampler.max_cache_tokens, or max_batch rows at full length) and the full-length
sequences it holds; otherwise its dense slots:

  python launch/plan_memory.py --config=configs/deepswe_preview_eval.py --sampler \
      --num_devices=8 --device_memory_gb=80
  python launch/plan_memory.py --config=configs/qwen3_1p7b_1gpu.py --sampler --num_devices=1

Parameter shapes and logical axes come from `nnx.eval_shape` of the model (nothing is allocated);
each array's per-device size follows the config's sharding rules on the (data, fsdp, tensor) mesh.
Optimizer state is AdamW (two moments in param_dtype); gradients match the parameters.
Activations are an estimate for one micro-batch (rl.micro_batch_size rows of the longest
trajectory padded to its length bucket; the report names the padded length) under the remat
policy, with config.attention's kernel ('xla' keeps [heads, seq, seq] scores; 'cudnn' / 'pallas'
are flash kernels; --attention overrides). The activation factors are checked against XLA's
compiled memory analysis in tests/launch/test_plan_memory.py.
"""

from __future__ import annotations

import math
import os
import sys

# Run as a script (python launch/plan_memory.py) the repository root, where configs/ lives, is
# not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.experiment.memory_plan import format_plan, plan_memory  # noqa: E402
from deepswe_jax.experiment.sampler_memory_plan import (  # noqa: E402
    format_sampler_plan,
    plan_sampler_memory,
)

_CONFIG = config_flags.DEFINE_config_file("config", None, "Experiment config file.")
_NUM_DEVICES = flags.DEFINE_integer(
    "num_devices", None, "Devices in the mesh (default: config.mesh's product, or 64 with a -1)."
)
_MESH = flags.DEFINE_string(
    "mesh", None, "Mesh override DATAxFSDPxTENSOR, e.g. 1x8x8 (-1 for one axis = the rest)."
)
_DEVICE_MEMORY_GB = flags.DEFINE_float("device_memory_gb", 80.0, "Memory of one device in GB.")
_SEQ_LEN = flags.DEFINE_integer(
    "seq_len",
    None,
    "Row length (default agent.max_prompt_tokens + max_context padded to its length bucket).",
)
_SAMPLER = flags.DEFINE_bool(
    "sampler",
    False,
    "Plan config.sampler.kind's sampler, not training: the vLLM engines (KV cache blocks), or "
    "the JAX sampler's weights and KV cache (its pages with config.sampler.paged).",
)
_ATTENTION = flags.DEFINE_enum(
    "attention",
    None,
    ["xla", "cudnn", "pallas"],
    "Attention kernel (default config.attention); xla keeps [heads, seq, seq] scores per layer.",
)


def main(argv: list[str]) -> None:
    del argv
    config = _CONFIG.value
    if config is None:
        raise app.UsageError("--config is required, e.g. --config=configs/deepswe_qwen3_32b.py")
    if _MESH.value:
        try:
            data, fsdp, tensor = (int(size) for size in _MESH.value.lower().split("x"))
        except ValueError:
            raise app.UsageError(
                f"--mesh={_MESH.value!r}: expected DATAxFSDPxTENSOR like 1x8x8"
            ) from None
        config.mesh.update(data=data, fsdp=fsdp, tensor=tensor)
    num_devices = _NUM_DEVICES.value
    if num_devices is None:
        sizes = (config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
        num_devices = 64 if -1 in sizes else math.prod(sizes)
    if _SAMPLER.value:
        plan = plan_sampler_memory(config, num_devices, device_memory_gb=_DEVICE_MEMORY_GB.value)
        print(format_sampler_plan(plan, config))
        return
    plan = plan_memory(config, num_devices, seq_len=_SEQ_LEN.value, attention=_ATTENTION.value)
    print(format_plan(plan, config, _DEVICE_MEMORY_GB.value))


if __name__ == "__main__":
    cli.run(main)
