"""The GPU configs fit 80 GB per device by the memory planner, with fp32 master weights, flash
attention and rows padded no further than the longest trajectory (36,864 tokens)."""

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from configs import deepswe_qwen3_8b, deepswe_qwen3_32b, qwen3_1p7b_1gpu
from deepswe_jax.experiment.memory_plan import GB, plan_memory
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.batch import bucket_length, length_buckets_up_to, row_length_buckets
from deepswe_jax.sampling.memory import memory_per_device

DEVICE_GB = 80


@pytest.mark.parametrize(
    "module, num_devices, params, margin_gb",
    [
        (deepswe_qwen3_32b, 64, 32_762_123_264, 42),
        (deepswe_qwen3_8b, 8, 8_190_735_360, 39),
        (qwen3_1p7b_1gpu, 1, 1_720_574_976, 40),
    ],
    ids=["32b_on_64", "8b_on_8", "1.7b_on_1"],
)
def test_config_fits_80gb_per_device_with_margin(module, num_devices, params, margin_gb):
    config = module.get_config()
    plan = plan_memory(config, num_devices)
    assert plan.num_parameters == params
    assert config.param_dtype == "float32"  # master weights and AdamW moments
    assert config.compute_dtype == "bfloat16" and config.remat == "full"
    assert config.attention == "cudnn" and config.rl.loss_sequences == "all"
    assert plan.seq_len == plan.max_row_tokens == 36_864  # padded to itself, not 65,536
    assert config.rl.micro_batch_size % (plan.mesh[0] * plan.mesh[1]) == 0
    assert DEVICE_GB - plan.total / GB >= margin_gb


def test_xla_attention_would_not_fit_the_32b_config():
    """fp32 [heads, seq, seq] scores of one layer: 179 GB per device dense (the issue's figure,
    211.75 GB in all); the XLA path's query blocks compute 17/32 of them: still over 80 GB."""
    plan = plan_memory(deepswe_qwen3_32b.get_config(), 64, attention="xla")
    assert round(plan.total / GB, 2) == 130.21


def test_one_gpu_config_fits_with_its_jax_sampler_beside_training():
    config = qwen3_1p7b_1gpu.get_config()
    training = plan_memory(config, 1).total
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    model = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0), dtype=jnp.bfloat16)
    )
    max_len = config.agent.max_prompt_tokens + config.agent.max_context
    slots = min(config.sampler.max_batch, config.sampler.max_cache_tokens // max_len)
    weights, cache = memory_per_device(
        model, slots=slots, max_cache_len=max_len, mesh=make_mesh(devices=jax.devices()[:1])
    )
    assert slots == 4 and cache == 2 * 28 * 4 * max_len * 8 * 128 * 2
    assert DEVICE_GB - (training + weights + cache) / GB >= 15


def test_length_buckets_end_at_the_longest_trajectory():
    assert length_buckets_up_to(36_864) == (
        *(2**n for n in range(7, 16)),  # 128 ... 32,768
        36_864,
    )
    assert length_buckets_up_to(36_864, 4096)[-2:] == (32_768, 36_864)
    assert length_buckets_up_to(1_600) == (128, 256, 512, 1024, 1664)  # multiples of 128
    buckets = row_length_buckets(36_864)  # config.rl.length_buckets = ()
    assert bucket_length(36_863, buckets) == 36_864 and bucket_length(20_000, buckets) == 32_768
    assert row_length_buckets(36_864, (1024, 2048)) == (1024, 2048)
    config_buckets = deepswe_qwen3_32b.get_config().rl.length_buckets
    assert bucket_length(33_000, config_buckets) == 36_864
    assert bucket_length(8_193, config_buckets) == 12_288
