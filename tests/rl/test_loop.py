"""The RL loop: task stream, metrics, resume after kill -9 (bit-exact), clear errors, and a
learning smoke test (GRPO++ on a two-token bandit raises the reward).

The resume test runs the loop in subprocesses (this file is also the worker script) with a
ScriptedSampler and an in-memory environment pool, so every iteration is deterministic.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import nnx

from configs import tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.parsing import render_function_call
from deepswe_jax.agent.trajectory import StopReason, Trajectory, read_trajectories
from deepswe_jax.checkpoint import TrainCheckpoints, restore_params, save_params
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment import model_factory, optimizer_settings, train, update_settings
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM, save_hf_checkpoint
from deepswe_jax.parallel import make_mesh
from deepswe_jax.rl.loop import tasks_for_iteration, update_policy
from deepswe_jax.rl.metrics import read_metrics, rollout_metrics
from deepswe_jax.rl.objectives import LossSettings
from deepswe_jax.rl.optimizer import make_optimizer
from deepswe_jax.rl.train_step import Trainer
from deepswe_jax.sampling.base import GenerateRequest, SamplingParams
from deepswe_jax.sampling.jax_sampler import JaxSampler
from deepswe_jax.sampling.scripted import ScriptedSampler

REPO_ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO_ROOT / "tests" / "assets" / "tokenizer"
FIX = render_function_call(
    "file_editor",
    {"command": "str_replace", "path": "/testbed/calc.py", "old_str": "-", "new_str": "+"},
)
FINISH = render_function_call("finish", {"command": "submit"})


def make_task(index: int) -> Task:
    return Task(
        instance_id=f"calc-{index}",
        repo="calc",
        base_commit="0" * 40,
        problem_statement=f"add() subtracts (report {index}).",
        patch="",
        test_patch="",
        FAIL_TO_PASS=("tests/test_calc.py::test_add",),
        PASS_TO_PASS=(),
        image="deepswe/calc:base",
    )


@dataclasses.dataclass(frozen=True)
class MemoryStep:
    observation: str
    done: bool
    exit_code: int | None
    duration_s: float
    env_error: bool = False


class MemoryEnv:
    """A repository that is fixed once the agent calls file_editor; finish ends the episode."""

    def __init__(self, task: Task):
        self.task = task
        self.edited = False

    async def step(self, tool: str, params: dict[str, str]) -> MemoryStep:
        if tool == "finish":
            return MemoryStep("<<< Finished >>>", True, 0, 0.0)
        self.edited |= tool == "file_editor"
        return MemoryStep(f"Execution output of [{tool}]:\nok", False, 0, 0.0)

    async def patch(self) -> str:
        return "--- a/calc.py\n+++ b/calc.py\n" if self.edited else ""


class MemoryPool:
    """EnvPool's interface in memory; reward 1 for a non-empty patch. `kill_at_grade`: the
    process kills itself with SIGKILL at that grading call (1-based), mid-run."""

    def __init__(self, kill_at_grade: int = 0):
        self.kill_at_grade = kill_at_grade
        self.graded = 0

    @contextlib.asynccontextmanager
    async def acquire(self, task: Task):
        yield MemoryEnv(task)

    async def grade(self, task: Task, patch: str, *, timeout: float = 300) -> GradeResult:
        self.graded += 1
        if self.graded == self.kill_at_grade:
            os.kill(os.getpid(), signal.SIGKILL)
        resolved = bool(patch)
        status = "resolved" if resolved else "unresolved"
        return GradeResult(task.instance_id, status, float(resolved), True, resolved)

    async def run_with_retries(self, episode, *, failed, name: str = "episode"):
        return await episode()  # no infrastructure to fail

    def metrics(self) -> dict[str, float]:
        return {"envs/graded": self.graded}

    async def close(self) -> None:
        pass


def alternating_sampler(tokenizer: ChatTokenizer) -> ScriptedSampler:
    """Conversation k edits then finishes when k is even and finishes at once when odd, so each
    group of an even number of rollouts has rewards 1, 0, 1, 0, ... (nonzero advantages)."""
    fix = [tokenizer.encode_text(FIX) + [tokenizer.im_end_id]]
    finish = [tokenizer.encode_text(FINISH) + [tokenizer.im_end_id]]
    started = []

    def script(prompt: tuple[int, ...]):
        started.append(prompt)
        return fix + finish if len(started) % 2 else finish

    return ScriptedSampler(script)


def scripted_config(total_steps: int):
    config = tiny.get_config()
    config.tokenizer = str(TOKENIZER_DIR)
    config.model.update(hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    config.model.update(num_attention_heads=2, num_key_value_heads=1, head_dim=16)
    config.rl.update(total_steps=total_steps, tasks_per_step=2, n_rollouts=2, micro_batch_size=2)
    config.rl.update(lr=1e-3)
    config.agent.update(max_steps=3, max_prompt_tokens=2048, max_context=256)
    config.checkpoint.update(every=1, keep=10, async_save=True)
    return config


def run_worker(workdir: Path, total_steps: int, kill_at_grade: int = 0) -> subprocess.Popen:
    """This file as a script: the scripted loop in a fresh single-device process."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "XLA_FLAGS": "", "JAX_PLATFORMS": "cpu"}
    command = [sys.executable, __file__, str(workdir), str(total_steps), str(kill_at_grade)]
    return subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def finish(process: subprocess.Popen) -> tuple[int, str]:
    output, _ = process.communicate(timeout=600)
    return process.returncode, output.decode(errors="replace")


def saved_params(workdir: Path, step: int) -> dict:
    config = scripted_config(step)
    abstract = nnx.eval_shape(model_factory(config))
    _, params = nnx.split(abstract, nnx.Param)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    path = TrainCheckpoints(workdir / "checkpoints").step_directory(step)
    return jax.device_get(nnx.to_pure_dict(restore_params(path, params, mesh=mesh)))


def sampled(path: Path) -> list[tuple]:
    """What a trajectory file says was sampled and earned (wall-clock timings aside)."""
    return [
        (t.task_id, t.rollout_index, t.policy_version, t.token_ids, t.loss_mask, t.reward)
        for t in read_trajectories(path)
    ]


def test_task_stream_is_seeded_distinct_and_covers_each_epoch():
    tasks = [make_task(i) for i in range(5)]
    position, epoch_ids = 0, []
    for _ in range(5):
        chosen, position = tasks_for_iteration(tasks, seed=3, position=position, count=2)
        assert len({t.instance_id for t in chosen}) == 2
        epoch_ids += [t.instance_id for t in chosen]
    assert sorted(epoch_ids[:5]) == sorted(t.instance_id for t in tasks)
    again, _ = tasks_for_iteration(tasks, seed=3, position=4, count=2)
    assert [t.instance_id for t in again] == epoch_ids[4:6]
    other, _ = tasks_for_iteration(tasks, seed=4, position=0, count=5)
    assert [t.instance_id for t in other] != epoch_ids[:5]
    with pytest.raises(ValueError, match="tasks_per_step=6"):
        tasks_for_iteration(tasks, seed=0, position=0, count=6)


def trajectory(task_id: str, reward: float, stop: StopReason, steps: int = 2) -> Trajectory:
    return Trajectory(
        task_id=task_id,
        rollout_index=0,
        policy_version=0,
        prompt_ids=(1, 2, 3),
        token_ids=(1, 2, 3, 4, 5, 6, 7),
        loss_mask=(0, 0, 0, 1, 1, 0, 1),
        sampler_logprobs=(0.0, 0.0, 0.0, -1.0, -1.0, 0.0, -1.0),
        reward=reward,
        stop_reason=stop,
        infra_error=stop is StopReason.env_error,
        num_steps=steps,
        patch="",
        timings={"grading_s": 2.0, "total_s": 10.0},
        steps=(),
        grade=None,
    )


def test_rollout_metrics_pass_rates_and_stop_reasons():
    finished, max_steps = StopReason.finished, StopReason.max_steps
    trajectories = [
        trajectory("a", 1.0, finished),
        trajectory("a", 1.0, finished),
        trajectory("b", 1.0, finished),
        trajectory("b", 0.0, max_steps, steps=4),
        trajectory("c", 0.0, finished),
        trajectory("c", 0.0, StopReason.env_error),
    ]
    metrics = rollout_metrics(trajectories)
    assert metrics["rollout/reward_mean"] == pytest.approx(0.5)
    assert metrics["rollout/pass_at_1"] == pytest.approx(0.5)
    assert metrics["rollout/pass_at_n"] == pytest.approx(2 / 3)
    assert metrics["rollout/solve_all"] == pytest.approx(1 / 3)
    assert metrics["rollout/solve_partial"] == pytest.approx(1 / 3)
    assert metrics["rollout/solve_none"] == pytest.approx(1 / 3)
    assert metrics["rollout/stop/finished"] == 4
    assert metrics["rollout/stop/max_steps"] == 1
    assert metrics["rollout/stop/env_error"] == 1
    assert metrics["rollout/infra_errors"] == 1
    assert metrics["rollout/response_tokens_mean"] == 4
    assert metrics["rollout/assistant_tokens_mean"] == 3
    assert metrics["rollout/steps_max"] == 4
    assert metrics["time/episode_grading_s_mean"] == 2.0


def test_resume_after_kill_is_bit_exact(tmp_path):
    """4 steps in one go == 2 steps, kill -9 during step 3 (step 2's async save may still be
    writing), resume to 4: same parameters, bit for bit."""
    reference = run_worker(tmp_path / "reference", 4)
    # Two groups of two rollouts per step: grading call 9 is the first of step 3.
    killed = run_worker(tmp_path / "resumed", 4, kill_at_grade=9)
    code, output = finish(killed)
    assert code == -signal.SIGKILL, output
    latest = TrainCheckpoints(tmp_path / "resumed" / "checkpoints").latest_step()
    assert latest in (1, 2), output
    code, output = finish(run_worker(tmp_path / "resumed", 4))
    assert code == 0, output
    assert f"resuming from {tmp_path / 'resumed' / 'checkpoints' / str(latest)}" in output
    code, output = finish(reference)
    assert code == 0, output

    expected, actual = (
        saved_params(tmp_path / "reference", 4),
        saved_params(tmp_path / "resumed", 4),
    )
    initial = saved_params(tmp_path / "reference", 1)
    for path, value in jax.tree_util.tree_leaves_with_path(expected):
        got = actual
        for key in path:
            got = got[key.key]
        np.testing.assert_array_equal(got, value, err_msg=jax.tree_util.keystr(path))
    changed = jax.tree.map(lambda a, b: not np.array_equal(a, b), expected, initial)
    assert any(jax.tree.leaves(changed)), "training did not change the parameters"

    rows = {name: read_metrics(tmp_path / name) for name in ("reference", "resumed")}
    assert [row["step"] for row in rows["resumed"]] == [1, 2, 3, 4]
    for ours, theirs in zip(rows["reference"], rows["resumed"], strict=True):
        assert ours["train/loss"] == theirs["train/loss"]
        assert ours["rollout/reward_mean"] == 0.5
        assert ours["rollout/solve_partial"] == 1.0
    assert [row["envs/graded"] for row in rows["reference"]] == [4, 8, 12, 16]  # pool metrics
    for iteration in range(4):
        name = f"trajectories/iter_{iteration:06d}.jsonl"
        assert sampled(tmp_path / "reference" / name) == sampled(tmp_path / "resumed" / name)


def test_errors_name_the_missing_piece(tmp_path, monkeypatch):
    config = scripted_config(1)
    config.env.tasks = str(tmp_path / "missing.jsonl")
    with pytest.raises(FileNotFoundError, match="config.env.tasks=.*missing.jsonl"):
        train(config, tmp_path / "run")
    config = scripted_config(1)
    config.tokenizer = str(tmp_path)
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        train(config, tmp_path / "run", tasks=[make_task(0)])
    config = scripted_config(1)
    config.init_from = str(tmp_path / "nowhere")
    tasks = [make_task(0), make_task(1)]  # tasks_per_step=2
    with pytest.raises(FileNotFoundError, match="config.init_from"):
        train(config, tmp_path / "run", tasks=tasks, env_pool=MemoryPool())
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    with pytest.raises(RuntimeError, match="start the Docker engine"):
        train(scripted_config(1), tmp_path / "run", tasks=tasks)


def test_init_from_hf_and_orbax_directories(tmp_path):
    """config.init_from: a HF directory or an Orbax parameters directory gives exactly its
    parameters (total_steps=0 returns the starting state); another architecture is refused."""
    config = scripted_config(0)
    model = model_factory(config)()
    model_config = Qwen3Config.from_hf_dict(config.model.to_dict())
    save_hf_checkpoint(model, tmp_path / "hf")
    save_params(tmp_path / "orbax", nnx.state(model, nnx.Param), model_config=model_config)
    expected = jax.device_get(nnx.to_pure_dict(nnx.state(model, nnx.Param)))
    tasks = [make_task(0), make_task(1)]  # tasks_per_step=2
    pieces = dict(sampler=ScriptedSampler([]), env_pool=MemoryPool(), tasks=tasks)
    for name in ("hf", "orbax"):
        config.init_from = str(tmp_path / name)
        state = train(config, tmp_path / f"run_{name}", **pieces)
        actual = jax.device_get(nnx.to_pure_dict(state.params))
        jax.tree.map(np.testing.assert_array_equal, actual, expected)
    assert model_config.hidden_size == 32
    config.model.hidden_size = 64
    with pytest.raises(ValueError, match="hidden_size=64 vs 32"):
        train(config, tmp_path / "run_other", **pieces)


def test_grpo_update_learns_a_two_token_bandit():
    """One prompt, one sampled token in {0, 1}, reward 1 for token 1: the loop's update
    (batch, leave-one-out advantages, GRPO++ step) drives the sampled reward from ~0.5 to > 0.9."""
    model_config = Qwen3Config(
        vocab_size=2,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=8,
    )
    config = tiny.get_config()
    config.model.update(
        {k: v for k, v in dataclasses.asdict(model_config).items() if k in config.model}
    )
    config.rl.update(lr=3e-2, micro_batch_size=32, weight_decay=0.0, advantage="loo")
    config.agent.update(max_context=1)
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    model = Qwen3ForCausalLM(model_config, rngs=nnx.Rngs(0))
    sampler = JaxSampler(model, max_batch=32, max_cache_len=8, mesh=mesh, seed=0)
    trainer = Trainer(
        model,
        make_optimizer(optimizer_settings(config.rl)),
        LossSettings(max_response_len=1, logprob_chunk=8),
        mesh=mesh,
        rules=config.sharding_rules,
    )
    state = trainer.init_state(nnx.state(model, nnx.Param))
    prompt = (0, 1, 1, 0)
    request = GenerateRequest(prompt, SamplingParams(max_new_tokens=1))
    groups, n = 4, 8
    rewards = []
    for _ in range(12):
        sampler.sync_weights(state.params)
        completions = asyncio.run(sampler.generate([request] * (groups * n)))
        rollouts = []
        for index, completion in enumerate(completions):
            rollouts.append(
                Trajectory(
                    task_id=f"group{index // n}",
                    rollout_index=index % n,
                    policy_version=0,
                    prompt_ids=prompt,
                    token_ids=prompt + completion.token_ids,
                    loss_mask=(0,) * len(prompt) + (1,),
                    sampler_logprobs=(0.0,) * len(prompt) + completion.logprobs,
                    reward=float(completion.token_ids == (1,)),
                    stop_reason=StopReason.finished,
                    infra_error=False,
                    num_steps=1,
                    patch="",
                    timings={},
                    steps=(),
                    grade=None,
                )
            )
        rewards.append(np.mean([t.reward for t in rollouts]))
        state, metrics = update_policy(trainer, state, rollouts, update_settings(config))
        assert metrics["train/sampler_approx_kl"] < 1e-5  # sampler and trainer score alike
    sampler.close()
    assert 0.25 < rewards[0] < 0.75, rewards
    assert rewards[-1] > 0.9, rewards


def _worker_main(workdir: str, total_steps: str, kill_at_grade: str) -> None:
    tokenizer = ChatTokenizer.from_directory(TOKENIZER_DIR)
    sampler = alternating_sampler(tokenizer)
    config = scripted_config(int(total_steps))
    tasks = [make_task(i) for i in range(3)]
    pool = MemoryPool(int(kill_at_grade))
    train(config, workdir, sampler=sampler, env_pool=pool, tasks=tasks, show_progress=False)
    print(json.dumps({"graded": pool.graded}))


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("deepswe_jax").setLevel(logging.INFO)
    _worker_main(*sys.argv[1:])
