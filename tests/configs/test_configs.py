"""Configs: the contract's fields, Qwen3-32B's exact parameter count, command-line overrides,
and the environment backend a config selects (experiment.make_env_pool)."""

import ast
import asyncio
import dataclasses
import importlib
import io
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
import tokenize

import jax
import pytest
import tokenizers
from flax import nnx
from ml_collections import ConfigDict

import configs
from configs import common, deepswe_qwen3_32b, tiny
from deepswe_jax import cli
from deepswe_jax.env.docker.docker_runtime import DockerRuntimeFactory
from deepswe_jax.env.docker.hosts import default_endpoint
from deepswe_jax.env.k8s.k8s_pods import K8sPodSettings
from deepswe_jax.experiment import make_env_pool
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import DEFAULT_RULES

CONTRACT_FIELDS = {
    "": [
        "seed",
        "param_dtype",
        "compute_dtype",
        "remat",
        "sharding_rules",
        "init_from",
        "tokenizer",
    ],
    "model": [
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "rope_theta",
        "rms_norm_eps",
        "tie_word_embeddings",
        "max_position_embeddings",
    ],
    "mesh": ["data", "fsdp", "tensor"],
    "rl": [
        "lr",
        "b1",
        "b2",
        "weight_decay",
        "grad_clip",
        "warmup_steps",
        "eps_low",
        "eps_high",
        "loss_mode",
        "advantage",
        "n_rollouts",
        "tasks_per_step",
        "micro_batch_size",
        "num_iterations",
        "logprob_chunk",
    ],
    "agent": [
        "max_steps",
        "max_prompt_tokens",
        "max_context",
        "step_timeout",
        "trajectory_timeout",
        "reward_timeout",
    ],
    "sampler": ["kind", "temperature", "top_p", "top_k", "max_batch"],
    "env": ["tasks", "max_envs", "mem_limit", "cpus", "pids_limit"],
    "checkpoint": ["every", "keep", "async_save"],
}

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _abstract_parameter_count(config: ConfigDict) -> int:
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    abstract = nnx.eval_shape(lambda: Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0)))
    leaves = jax.tree.leaves(nnx.state(abstract, nnx.Param))
    assert all(isinstance(leaf, jax.ShapeDtypeStruct) for leaf in leaves)  # nothing allocated
    return sum(leaf.size for leaf in leaves)


@pytest.mark.parametrize("module", [common, tiny, deepswe_qwen3_32b], ids=lambda m: m.__name__)
def test_every_contract_field_exists(module):
    config = module.get_config()
    for section, names in CONTRACT_FIELDS.items():
        node = config[section] if section else config
        missing = [name for name in names if name not in node]
        assert not missing, f"{module.__name__}: {section or 'top level'} lacks {missing}"
    assert tuple(config.sharding_rules) == DEFAULT_RULES
    assert config.rl.loss_mode in ("seq_sum_const", "token_mean", "seq_mean_token_mean")
    assert config.remat in ("none", "full", "save_dots", "offload")
    assert config.sampler.kind in ("jax", "vllm")


def schema(config: ConfigDict, prefix: str = "") -> dict[str, type]:
    """{dotted field: type} of every leaf field of `config`."""
    fields = {}
    for key in config.keys():
        if isinstance(config[key], ConfigDict):
            fields.update(schema(config[key], f"{prefix}{key}."))
        else:
            fields[prefix + key] = config.get_type(key)
    return fields


def experiment_configs() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(configs.__path__) if m.name != "common")


@pytest.mark.parametrize("name", experiment_configs())
def test_every_config_has_exactly_the_fields_common_declares(name):
    """configs/common.py is the schema: experiment configs only change values (the config is
    locked, so adding a field outside common.py fails in get_config), with the same types."""
    config = importlib.import_module(f"configs.{name}").get_config()
    assert config.is_locked
    assert schema(config) == schema(common.get_config())


def test_every_common_field_says_what_it_means():
    """Each field declared in configs/common.py has a comment on its line or a comment line
    right above it (model.* are HF config.json's fields, named once for the section)."""
    path = os.path.join(REPO_ROOT, "configs", "common.py")
    source = open(path).read()
    lines = source.splitlines()
    commented = {
        token.start[0]
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    tree = ast.parse(source)
    model_dict = next(
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "config.model"
    )
    model_keywords = {id(k) for k in ast.walk(model_dict) if isinstance(k, ast.keyword)}
    declarations = [  # (field name, node): dict(...) keywords and config.x = ... statements
        (node.arg, node)
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and id(node) not in model_keywords
    ] + [
        (node.targets[0].attr, node)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and ast.unparse(node.targets[0]).count(".") == 1
        and "ConfigDict" not in ast.unparse(node.value)
    ]
    undocumented = [
        name
        for name, node in declarations
        if not commented & set(range(node.lineno, node.end_lineno + 1))
        and not lines[node.lineno - 2].strip().startswith("#")
    ]
    assert not undocumented, f"fields without a comment saying what they mean: {undocumented}"
    names = {name for name, _ in declarations} | set(common.get_config().model.keys())
    leaf_names = {field.rpartition(".")[2] for field in schema(common.get_config())}
    assert leaf_names <= names


def test_qwen3_32b_parameter_count_from_abstract_model():
    config = deepswe_qwen3_32b.get_config()
    v, e, m, layers = 151936, 5120, 25600, 64
    q, kv, d = 64 * 128, 8 * 128, 128
    per_layer = e * q + 2 * e * kv + q * e + 2 * d + 3 * e * m + 2 * e  # attn, q/k norm, mlp, norms
    expected = layers * per_layer + 2 * v * e + e  # untied embedding + lm_head, final norm
    assert expected == 32_762_123_264  # what HF reports for Qwen/Qwen3-32B
    assert _abstract_parameter_count(config) == expected


def test_deepswe_hyperparameters():
    config = deepswe_qwen3_32b.get_config()
    assert (config.rl.lr, config.rl.n_rollouts, config.rl.tasks_per_step) == (1e-6, 8, 64)
    assert (config.rl.eps_low, config.rl.eps_high) == (0.2, 0.28)
    assert config.rl.loss_mode == "seq_sum_const" and config.rl.advantage == "loo"
    assert (config.agent.max_prompt_tokens, config.agent.max_context) == (4096, 32768)
    assert config.agent.max_steps == 50
    assert (config.agent.reward_timeout, config.agent.step_timeout) == (300, 90)
    assert config.agent.trajectory_timeout == 5400
    assert (config.sampler.temperature, config.sampler.top_p, config.sampler.top_k) == (1, 1, 0)
    assert config.compute_dtype == "bfloat16" and config.remat != "none"
    mesh = config.mesh
    assert mesh.data * mesh.fsdp * mesh.tensor == 64
    assert config.rl.micro_batch_size % (mesh.data * mesh.fsdp) == 0
    assert config.model.tie_word_embeddings is False


def test_tiny_config_is_small_and_tied():
    config = tiny.get_config()
    assert config.model.tie_word_embeddings is True
    assert 1e6 < _abstract_parameter_count(config) < 1e7
    assert config.model.hidden_size == config.model.num_attention_heads * config.model.head_dim
    assert config.agent.max_context <= 4096 and config.sampler.kind == "jax"


_LOAD_WITH_FLAGS = textwrap.dedent(
    """
    import json, sys
    from absl import app
    from ml_collections import config_flags
    _CONFIG = config_flags.DEFINE_config_file("config")
    def main(argv):
        print(json.dumps(_CONFIG.value.to_dict()))
    app.run(main)
    """
)


def test_command_line_overrides():
    command = [
        sys.executable,
        "-c",
        _LOAD_WITH_FLAGS,
        "--config=configs/tiny.py",
        "--config.rl.lr=3e-4",
        "--config.mesh.fsdp=2",
        "--config.remat=full",
        "--config.agent.max_steps=7",
        "--config.rl.peak_flops_per_device=1e12",
        "--config.env.backend=kubernetes",
        "--config.env.kubernetes.image_prefix=registry.example.com/",
        "--config.env.kubernetes.node_selector=cloud.google.com/gke-nodepool=envs",
    ]
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=120
    )
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["rl"]["lr"] == 3e-4
    assert loaded["mesh"]["fsdp"] == 2
    assert loaded["remat"] == "full"
    assert loaded["agent"]["max_steps"] == 7
    assert loaded["rl"]["peak_flops_per_device"] == 1e12
    assert loaded["env"]["backend"] == "kubernetes"
    assert loaded["env"]["kubernetes"]["image_prefix"] == "registry.example.com/"
    assert loaded["env"]["kubernetes"]["node_selector"] == ["cloud.google.com/gke-nodepool=envs"]
    assert loaded["model"]["hidden_size"] == tiny.get_config().model.hidden_size


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "--config.rl.lrr=1",
            "--config.rl.lrr: section rl has no field 'lrr' (did you mean rl.lr?); "
            "configs/common.py declares every field",
        ),
        ("--config.rl.lr=abc", "flag --config.rl.lr=abc: could not convert string to float"),
    ],
)
def test_a_bad_override_is_refused_with_the_fields_name_before_any_work(
    tmp_path, override, message
):
    workdir = tmp_path / "run"
    command = [
        sys.executable,
        "launch/train.py",
        "--config=configs/tiny.py",
        f"--workdir={workdir}",
        override,
    ]
    result = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert not workdir.exists()


def test_override_fields_are_checked_against_the_schema():
    config = tiny.get_config()
    argv = ["--config", "configs/tiny.py", "--config.rl.lr", "1", "--noconfig.rl.overlap"]
    assert cli._flag_arguments(argv, "config") == (
        "configs/tiny.py",
        ["rl.lr", "rl.overlap"],
    )
    assert cli.unknown_field(config, "env.kubernetes.namespace") is None
    assert "did you mean env.kubernetes.namespace?" in cli.unknown_field(
        config, "env.kubernetes.namespce"
    )
    assert "section sampler.kind has no field 'x'" in cli.unknown_field(config, "sampler.kind.x")
    assert "the config has no field 'learning_rate'" in cli.unknown_field(config, "learning_rate")


def test_tiny_vocabulary_covers_the_test_tokenizer():
    config = tiny.get_config()
    tokenizer = tokenizers.Tokenizer.from_file(
        os.path.join(REPO_ROOT, config.tokenizer, "tokenizer.json")
    )
    assert tokenizer.get_vocab_size(with_added_tokens=True) == config.model.vocab_size


def test_kubernetes_defaults_are_the_pod_settings():
    settings = common.get_config().env.kubernetes
    defaults = {f.name: f.default for f in dataclasses.fields(K8sPodSettings)}
    from_env = {"mem_limit", "cpus", "node_selector"}  # config.env's, and parsed from strings
    for name in defaults.keys() - from_env:
        assert settings[name] == defaults[name], name
    assert tuple(settings.node_selector) == () and defaults["node_selector"] is None


def test_docker_backend_builds_a_docker_pool():
    config = tiny.get_config()
    assert config.env.backend == "docker"
    pool = make_env_pool(config, "pytest-configs", grade_concurrency=3)
    assert pool.runtime_factory is None and pool.build_images
    assert [host.endpoint for host in pool.placement.hosts.hosts] == [default_endpoint()]
    assert pool.placement.factory == DockerRuntimeFactory(
        mem_limit="1g", nano_cpus=10**9, pids_limit=256, disk_limit="10g", disk_limit_mode="auto"
    )
    assert pool.step_timeout == config.agent.step_timeout and pool.max_envs == 8
    assert pool._grade_slots._value == 3  # gradings at once
    asyncio.run(pool.close())


def test_unknown_backend_and_misplaced_settings_are_refused_with_what_to_set():
    config = tiny.get_config()
    config.env.backend = "slurm"
    with pytest.raises(ValueError, match=r"'slurm' is not one of \('docker', 'kubernetes'\)"):
        make_env_pool(config, "pytest-configs")
    config.env.backend = "kubernetes"
    config.env.docker_hosts = ("ssh://worker-1",)
    with pytest.raises(ValueError, match="docker_hosts=.*is for backend=docker; clear it"):
        make_env_pool(config, "pytest-configs")
    config.env.docker_hosts = ()
    config.env.kubernetes.node_selector = ("envs",)
    with pytest.raises(ValueError, match="'envs' is not 'key=value'"):
        make_env_pool(config, "pytest-configs")
