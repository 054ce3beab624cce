"""launch/plan_memory.py: per-device bytes for the 32B config on 64 x 80 GB devices, and with
--sampler the sampler's: vLLM's KV cache in blocks of 16 tokens, the JaxSampler's pages."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from configs import deepswe_qwen3_32b, qwen3_1p7b_1gpu, tiny
from deepswe_jax.checkpoint import restore_target
from deepswe_jax.experiment.memory_plan import GB, plan_memory
from deepswe_jax.experiment.sampler_memory_plan import format_sampler_plan, plan_sampler_memory
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import batch_sharding, make_mesh, state_shardings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_plan_memory_runs_for_qwen3_32b_on_64_devices():
    command = [
        sys.executable,
        "-m",
        "launch.plan_memory",
        "--config=configs/deepswe_qwen3_32b.py",
        "--num_devices=64",
        "--device_memory_gb=80",
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "32,762,123,264" in result.stdout
    assert "fits: yes" in result.stdout


def kv_bytes_per_token(config, kv_heads_per_device: int) -> int:
    """Keys and values of one token in every layer on one device, from config.model."""
    element = jnp.dtype(config.sampler.dtype).itemsize
    return (
        2 * config.model.num_hidden_layers * kv_heads_per_device * config.model.head_dim * element
    )


@pytest.mark.parametrize(
    "flags, lines",
    [
        (
            ["--config=configs/deepswe_qwen3_32b.py", "--num_devices=64"],
            [
                "vLLM: 8 engine(s) x tensor_parallel_size=8",
                "147,456 blocks of 16 tokens hold 64 full-length sequence(s) of 36,864 tokens",
                "fits: NO",
            ],
        ),
        (
            ["--config=configs/qwen3_1p7b_1gpu.py", "--num_devices=1", "--config.sampler.paged"],
            [
                "paged KV cache: 9,216 pages of 16 tokens shared by 64 rows; 4 full-length "
                "sequence(s) of 36,864 tokens",
                "fits: yes",
            ],
        ),
        (
            ["--config=configs/qwen3_1p7b_1gpu.py", "--num_devices=1", "--noconfig.sampler.paged"],
            ["dense KV cache: 4 slot(s) of 36,864 tokens", "fits: yes"],
        ),
    ],
    ids=["vllm_32b", "jax_1.7b_paged", "jax_1.7b_dense"],
)
def test_sampler_plan_prints_the_kv_cache(flags, lines):
    command = [sys.executable, "-m", "launch.plan_memory", "--sampler", *flags]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    for line in lines:
        assert line in result.stdout


def test_vllm_plan_counts_kv_blocks_of_16_tokens():
    config = deepswe_qwen3_32b.get_config()
    plan = plan_sampler_memory(config, num_devices=64, device_memory_gb=80)
    # 8 engines of 8 GPUs share 512 sequences; a GPU holds 1 of the 8 KV heads.
    sequences, seq_len = 512 // 8, 4096 + 32768
    per_token = kv_bytes_per_token(config, kv_heads_per_device=1)
    assert plan.kv_bytes_per_token == per_token == 32_768
    assert plan.kv_blocks == sequences * seq_len // 16 == 147_456
    assert plan.full_length_sequences(plan.kv_blocks) == 64
    # 40% of 80 GB less the bf16 weights (1/8 per GPU) and under 1 GB of activations.
    room = 0.4 * 80 * GB - 32_762_123_264 * 2 / 8
    assert (room - GB) / (16 * per_token) < plan.budget_kv_blocks < room / (16 * per_token)
    assert plan.full_length_sequences(plan.budget_kv_blocks) == 19


def test_jax_sampler_plan_counts_pages_of_its_pool():
    config = qwen3_1p7b_1gpu.get_config()
    config.sampler.paged = True
    plan = plan_sampler_memory(config, num_devices=1)
    seq_len = config.agent.max_prompt_tokens + config.agent.max_context
    pages = 4 * 36_864 // 16
    assert (plan.paged, plan.pages, plan.rows, plan.seq_len) == (True, 9216, 64, seq_len)
    assert plan.full_length_sequences == 4
    per_token = kv_bytes_per_token(config, config.model.num_key_value_heads)
    assert plan.kv_cache == pages * 16 * per_token == 16_911_433_728
    assert plan.weights == 1_720_574_976 * 4  # float32 weights, one device
    assert plan.fits

    config.sampler.max_cache_tokens = 0  # a pool of max_batch rows at full length
    unbounded = plan_sampler_memory(config, num_devices=1)
    assert (unbounded.pages, unbounded.full_length_sequences) == (64 * seq_len // 16, 64)
    assert not unbounded.fits


def test_jax_sampler_plan_counts_the_xla_paged_reads_copy():
    """config.sampler.paged_attention='xla' gathers every row's pages into a dense copy of one
    layer (64 rows x the full length, keys and values) in each decode step, more than half the
    pool again: the plan counts it; the Pallas kernel reads in place."""
    config = qwen3_1p7b_1gpu.get_config()
    config.sampler.paged = True
    config.sampler.paged_attention = "pallas"
    kernel = plan_sampler_memory(config, num_devices=1)
    assert kernel.read_copy == 0 and kernel.total == kernel.weights + kernel.kv_cache
    config.sampler.paged_attention = "xla"
    gather = plan_sampler_memory(config, num_devices=1)
    per_token_layer = kv_bytes_per_token(config, 8) // config.model.num_hidden_layers
    assert gather.read_copy == 64 * 36_864 * per_token_layer == 9_663_676_416
    assert gather.total == kernel.total + gather.read_copy
    text = format_sampler_plan(gather, config)
    assert "decode read copy" in text and "paged_attention=pallas" in text


def test_jax_sampler_pool_splits_over_tensor_only():
    config = qwen3_1p7b_1gpu.get_config()
    config.sampler.paged = True
    one = plan_sampler_memory(config, num_devices=1)
    config.mesh.update(data=1, fsdp=1, tensor=2)
    assert plan_sampler_memory(config, num_devices=2).kv_cache == one.kv_cache // 2
    config.mesh.update(data=1, fsdp=2, tensor=1)
    assert plan_sampler_memory(config, num_devices=2).kv_cache == one.kv_cache


def test_dense_jax_sampler_plan_counts_slots():
    config = qwen3_1p7b_1gpu.get_config()
    config.sampler.paged = False
    plan = plan_sampler_memory(config, num_devices=1)
    seq_len = config.agent.max_prompt_tokens + config.agent.max_context
    assert (plan.paged, plan.pages, plan.rows, plan.full_length_sequences) == (False, 0, 4, 4)
    per_token = kv_bytes_per_token(config, config.model.num_key_value_heads)
    assert plan.kv_cache == 4 * seq_len * per_token


def test_fully_sharded_state_is_16_bytes_per_parameter_over_the_mesh():
    config = deepswe_qwen3_32b.get_config()
    config.mesh.update(data=1, fsdp=8, tensor=8)
    plan = plan_memory(config, num_devices=64)
    per_device = 32_762_123_264 / 64
    # fp32 params + 2 AdamW moments + fp32 grads; norms are replicated, so slightly above 1/64.
    state = plan.params + plan.optimizer + plan.gradients
    assert 16 * per_device <= state < 16 * per_device * 1.01


def test_remat_and_mesh_change_the_estimate():
    config = deepswe_qwen3_32b.get_config()
    full = plan_memory(config, num_devices=64)
    config.remat = "save_dots"
    save_dots = plan_memory(config, num_devices=64)
    assert save_dots.saved_activations > full.saved_activations
    config.remat = "full"
    config.mesh.update(data=1, fsdp=8, tensor=1)
    eight = plan_memory(config, num_devices=8)
    assert eight.params > 7 * full.params


@pytest.mark.parametrize("remat", ["none", "full", "save_dots"])
def test_activation_estimate_matches_xla_memory_analysis(remat):
    config = tiny.get_config()
    config.model.update(
        hidden_size=256,
        num_attention_heads=8,
        num_key_value_heads=2,
        intermediate_size=768,
        vocab_size=64,
    )
    config.update(remat=remat, compute_dtype="float32")
    config.mesh.update(data=1, fsdp=4, tensor=2)
    config.rl.micro_batch_size = 4
    seq_len = 1024
    plan = plan_memory(config, num_devices=8, seq_len=seq_len, attention="xla")

    mesh = make_mesh(1, 4, 2)
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    abstract = nnx.eval_shape(lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0), remat=remat))
    graphdef, state = nnx.split(abstract)

    def loss(state, input_ids):
        return nnx.merge(graphdef, state)(input_ids).mean()

    input_ids = jax.ShapeDtypeStruct((4, seq_len), jnp.int32, sharding=batch_sharding(mesh))
    with jax.set_mesh(mesh):
        target = restore_target(state, state_shardings(state, mesh))
        compiled = jax.jit(jax.grad(loss)).lower(target, input_ids).compile()
    xla_temp = compiled.memory_analysis().temp_size_in_bytes
    estimate = plan.saved_activations + plan.layer_working_set + plan.logits
    assert 0.6 < estimate / xla_temp < 1.6, (estimate, xla_temp)
