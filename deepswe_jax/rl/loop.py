"""The outer RL loop: roll out, grade, build the batch, update the policy, log, checkpoint.

    train(config, workdir)     # python launch/train.py --config=configs/tiny.py --workdir=...

Iteration k (0-based; its result is checkpoint step k + 1):

    tasks = tasks_for_iteration(...)           next tasks of a seeded per-epoch shuffle
    sampler.sync_weights(params)               rollouts sample from the current policy
    trajectories = collect_rollouts(tasks, n)  episodes in containers, graded in fresh ones
    state = update_policy(...)                 advantages + compact filter + batch, optimizer step(s)
    metrics -> metrics.jsonl and tensorboard/; checkpoint every config.checkpoint.every steps

The loop runs config.rl.total_steps iterations with config.rl.num_iterations optimizer steps
per batch (DeepSWE: 1). With config.rl.overlap, iteration k+1's rollouts run while iteration k
trains, sampling a policy at most config.rl.max_staleness updates old (rl/overlap.py).
Several processes (jax.distributed) each roll out their share of the tasks, share the
trajectories, feed their own rows of the batch and save checkpoints together; process 0 alone
writes config, metrics and trajectory files. Workdir layout: config.json, metrics.jsonl, tensorboard/,
trajectories/iter_XXXXXX.jsonl, checkpoints/<step>/. Started again on the same workdir, a run
resumes from its latest finished checkpoint: parameters, optimizer state, step, RNG key and
task-stream position; it then redoes the iterations after that step exactly as before when
sampling and environments are deterministic (scripted sampler, fixed seeds).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import jax
import ml_collections
import numpy as np
from flax import nnx

from deepswe_jax.agent.rollout import EpisodeSettings, collect_rollouts
from deepswe_jax.agent.trajectory import Trajectory, trajectories_path, write_trajectories
from deepswe_jax.checkpoint import (
    TrainCheckpoints,
    restore_target,
)
from deepswe_jax.env.protocols import EnvPoolProtocol
from deepswe_jax.env.tasks import Task
from deepswe_jax.experiment import (
    check_train_config,
    initial_params,
    load_task_list,
    load_tokenizer,
    make_env_pool,
    model_factory,
    prepare_task_images,
    sharding_rules,
)
from deepswe_jax.interrupts import deferred_interrupts
from deepswe_jax.parallel import make_mesh
from deepswe_jax.parallel.distributed import (
    allgather_bytes,
    host_copy,
    is_primary_process,
    process_local_record,
)
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.rl.batch import assemble_batch, row_length_buckets
from deepswe_jax.rl.metrics import MetricsWriter, batch_metrics, rollout_metrics
from deepswe_jax.rl.overlap import RolloutScheduler
from deepswe_jax.rl.train_step import LossSettings, Trainer, TrainState, make_optimizer
from deepswe_jax.sampling.base import Sampler

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
CHECKPOINT_DIR = "checkpoints"


@dataclasses.dataclass(frozen=True)
class RunState:
    """Where a run stands after `iteration` finished iterations (what a checkpoint restores)."""

    train_state: TrainState
    iteration: int
    tasks_consumed: int
    rng_key: jax.Array


def tasks_for_iteration(
    tasks: Sequence[Task], *, seed: int, position: int, count: int
) -> tuple[list[Task], int]:
    """The next `count` distinct tasks of the task stream, and the stream position after them.

    The stream is epoch after epoch of `tasks`, each epoch a permutation drawn from
    (seed, epoch), so the tasks of any iteration follow from `seed` and `position` alone.
    A task that would repeat within one iteration (near an epoch boundary) is skipped.
    """
    if not 0 < count <= len(tasks):
        raise ValueError(
            f"config.rl.tasks_per_step={count} must be between 1 and the number of tasks "
            f"({len(tasks)}); each task of a step gets its own rollout group"
        )
    chosen: dict[str, Task] = {}
    orders: dict[int, np.ndarray] = {}
    while len(chosen) < count:
        epoch, index = divmod(position, len(tasks))
        if epoch not in orders:
            orders[epoch] = np.random.default_rng([seed, epoch]).permutation(len(tasks))
        task = tasks[orders[epoch][index]]
        chosen.setdefault(task.instance_id, task)
        position += 1
    return list(chosen.values()), position


def update_policy(
    trainer: Trainer,
    state: TrainState,
    trajectories: Sequence[Trajectory],
    config: ml_collections.ConfigDict,
) -> tuple[TrainState, dict[str, float]]:
    """Batch the trajectories (advantages, compact filter, rows padded to a length bucket) and
    take config.rl.num_iterations optimizer steps on them; a batch without loss tokens is
    skipped (train/skipped = 1). Optional field: config.rl.compact_filtering (default True).

    Returns the new state and the batch metrics plus the last step's train/ metrics.
    """
    rl = config.rl
    batch = assemble_batch(
        trajectories,
        micro_batch_size=rl.micro_batch_size,
        advantage=rl.advantage,
        compact_filtering=rl.get("compact_filtering", True),
        length_buckets=row_length_buckets(
            config.agent.max_prompt_tokens + config.agent.max_context, rl.length_buckets
        ),
    )
    metrics = batch_metrics(batch.stats, len(batch.micro_batches))
    if not batch.micro_batches:
        return state, {**metrics, "train/skipped": 1.0}
    # Every process built the same global batch; each feeds the rows its devices hold.
    micro_batches = [process_local_record(mb, trainer.batch_sharding) for mb in batch.micro_batches]
    old_logprobs = None
    if rl.num_iterations > 1:  # several updates per batch: clip against the pre-update policy
        old_logprobs = [trainer.logprobs(state.params, mb) for mb in micro_batches]
    for _ in range(rl.num_iterations):
        state, train_metrics = trainer.step(state, micro_batches, old_logprobs)
    return state, {
        **metrics,
        "train/skipped": 0.0,
        **{f"train/{key}": value for key, value in train_metrics.items()},
    }


def restore_or_init(
    config: ml_collections.ConfigDict,
    trainer: Trainer,
    checkpoints: TrainCheckpoints,
    rules: Rules,
) -> RunState:
    """The newest checkpoint of the run that restores (a damaged newer one is skipped with a
    warning naming it), or a fresh start from config.init_from when there is none."""
    _, abstract_params = nnx.split(nnx.eval_shape(model_factory(config)), nnx.Param)
    abstract_opt_state = jax.eval_shape(trainer.optimizer.init, abstract_params)
    restored = checkpoints.restore_newest_intact(
        params=restore_target(abstract_params, trainer.state_shardings.params),
        opt_state=restore_target(abstract_opt_state, trainer.state_shardings.opt_state),
        mesh=trainer.mesh,
    )
    if restored is None:
        params = initial_params(config, trainer.mesh, rules)
        return RunState(trainer.init_state(params), 0, 0, jax.random.key(config.seed))
    step = restored.step
    optimizer_steps = restored.data_position["optimizer_steps"]
    train_state = TrainState(
        step=jax.device_put(np.int32(optimizer_steps), trainer.state_shardings.step),
        params=restored.params,
        opt_state=restored.opt_state,
    )
    logger.info("resuming from %s", checkpoints.step_directory(step))
    return RunState(train_state, step, restored.data_position["tasks_consumed"], restored.rng_key)


def make_sampler(
    config: ml_collections.ConfigDict,
    trainer: Trainer,
    params: nnx.State,
    rules: Rules,
    seed: int,
) -> Sampler:
    """config.sampler.kind 'jax' (in-process, on the training mesh; with several processes on
    this process's devices; `params` are the trainer's, a collective with several processes:
    all must call this) or 'vllm' (an in-process vLLM engine per config.sampler.*; weights come
    with the first sync_weights)."""
    sampler = config.sampler
    max_len = config.agent.max_prompt_tokens + config.agent.max_context
    if sampler.kind == "vllm":
        from deepswe_jax.sampling.vllm_engine import VLLMSettings
        from deepswe_jax.sampling.vllm_sampler import VLLMSampler

        settings = VLLMSettings(
            max_model_len=max_len,
            max_batch=sampler.max_batch,
            dtype=sampler.dtype,
            device=sampler.device,
            gpu_memory_utilization=sampler.gpu_memory_utilization,
            kv_cache_bytes=sampler.kv_cache_bytes,
            tensor_parallel_size=sampler.tensor_parallel_size,
            sleep=sampler.sleep,
            seed=seed,
        )
        return VLLMSampler(
            nnx.eval_shape(model_factory(config)),
            settings,
            hf_dir=sampler.hf_dir,
            processes_per_engine=sampler.processes_per_engine,
        )
    if sampler.kind != "jax":
        raise ValueError(
            f"config.sampler.kind={sampler.kind!r}; use 'jax' (in-process) or 'vllm'; scripted "
            "samplers are passed to train(..., sampler=...)"
        )
    if sampler.processes_per_engine != 1:
        raise ValueError(
            "config.sampler.processes_per_engine applies to kind='vllm'; JaxSampler runs one "
            "sampler per process (set it to 1)"
        )
    from deepswe_jax.sampling.jax_sampler import JaxSampler

    multiprocess = jax.process_count() > 1
    return JaxSampler(
        nnx.merge(trainer.graphdef, host_copy(params) if multiprocess else params),
        max_batch=sampler.max_batch,
        max_cache_len=max_len,
        max_cache_tokens=sampler.max_cache_tokens or None,
        mesh=make_mesh(1, -1, 1, devices=jax.local_devices()) if multiprocess else trainer.mesh,
        rules=rules,
        seed=seed,
    )


def rollout_share(tasks: Sequence[Task], processes_per_engine: int) -> list[Task]:
    """This process's share of an iteration's tasks: they are split among the processes that
    own a sampler (all, or the first of each group of `processes_per_engine`)."""
    group, member = divmod(jax.process_index(), processes_per_engine)
    if member:
        return []
    return list(tasks[group :: jax.process_count() // processes_per_engine])


def save_config(config: ml_collections.ConfigDict, workdir: Path) -> None:
    """Writes the resolved config to workdir/config.json, warning about changes on a resume."""
    path = workdir / CONFIG_FILE
    text = config.to_json_best_effort(indent=2, sort_keys=True)
    if path.exists() and path.read_text() != text:
        before = json.loads(path.read_text())
        after = json.loads(text)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        logger.warning("config differs from the one in %s (sections %s)", path, changed)
    path.write_text(text)


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Adds the block's wall-clock seconds to `timings[name]`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - started


def make_trainer(config: ml_collections.ConfigDict, rules: Rules) -> Trainer:
    """The jitted GRPO++ train step for config.model on the config.mesh of all devices."""
    return Trainer(
        nnx.eval_shape(model_factory(config)),
        make_optimizer(config.rl),
        LossSettings.from_config(config),
        mesh=make_mesh(config.mesh.data, config.mesh.fsdp, config.mesh.tensor),
        rules=rules,
        peak_flops_per_device=config.rl.get("peak_flops_per_device"),
        packed_rows=False,  # update_policy puts one trajectory in each row
    )


def sampler_seed(run: RunState) -> int:
    """The sampler's seed: from the run's key and the iteration it (re)starts at."""
    key = jax.random.fold_in(run.rng_key, run.iteration)
    return int(jax.random.randint(key, (), 0, 2**31 - 1))


def log_progress(
    step: int, total_steps: int, metrics: dict[str, float], *, saving: bool = False
) -> None:
    """One line per step; `saving`: a checkpoint of this step started (it is written in the
    background, and a failure stops the run before the next update)."""
    if "train/loss" in metrics:
        update = f"loss {metrics['train/loss']:.4g}"
    else:  # no episode with a nonzero advantage survived compact filtering: nothing to learn
        update = (
            f"no update ({metrics.get('batch/compact_filtered', 0):.0f}/"
            f"{metrics['rollout/episodes']:.0f} episodes compact-filtered, the rest with zero "
            "advantage)"
        )
    logger.info(
        "step %d/%d: reward %.3f, pass@1 %.3f, %s; rollout %.1fs, train %.1fs, "
        "sync %.2fs, %s %.2fs",
        step,
        total_steps,
        metrics["rollout/reward_mean"],
        metrics["rollout/pass_at_1"],
        update,
        metrics["time/rollout_s"],
        metrics["time/train_s"],
        metrics["time/sync_s"],
        "checkpoint started" if saving else "no checkpoint",
        metrics["time/checkpoint_s"],
    )


def published_weights(params: nnx.State, sampler: Sampler) -> nnx.State:
    """What the sampler is given: the trainer's params, or with several processes a whole host
    copy on each (a collective), since each process's sampler runs on its own devices; a
    sampler that extracts what it needs from the sharded params itself (`syncs_global_arrays`,
    the vLLM sampler) gets them as they are."""
    if jax.process_count() == 1 or getattr(sampler, "syncs_global_arrays", False):
        return params
    return host_copy(params)


def gather_trajectories(local: list[Trajectory]) -> list[Trajectory]:
    """Every process's trajectories, in process order (a collective with several processes)."""
    if jax.process_count() == 1:
        return local
    payload = "\n".join(t.to_json() for t in local).encode()
    return [
        Trajectory.from_json(line)
        for part in allgather_bytes(payload)
        for line in part.decode().splitlines()
    ]


def require_usable_episodes(trajectories: Sequence[Trajectory], iteration: int) -> None:
    """Raises unless some episode of the iteration ran to an answer: when every one ended in an
    environment failure there is nothing to learn from, and a run going on would train and
    checkpoint on nothing while reporting reward 0."""
    if trajectories and not all(t.infra_error for t in trajectories):
        return
    failures = [s["env_error"] for t in trajectories for s in t.steps if "env_error" in s]
    raise RuntimeError(
        f"iteration {iteration}: all {len(trajectories)} episodes failed in their environments"
        + (f" (first failure: {failures[0]})" if failures else "")
        + "; nothing to train on. Check the environments (`docker info`, the task images), "
        f"then run again: the run resumes from step {iteration}"
    )


def train(
    config: ml_collections.ConfigDict,
    workdir: str | os.PathLike,
    *,
    sampler: Sampler | None = None,
    env_pool: EnvPoolProtocol | None = None,
    tasks: Sequence[Task] | None = None,
    show_progress: bool = True,
) -> TrainState:
    """Runs (or resumes) the RL loop of the module docstring in `workdir`; returns the final state.

    sampler / env_pool / tasks: use these instead of the ones config describes (tests pass a
    ScriptedSampler and an in-memory pool); the caller closes what it passes. The config, tasks,
    tokenizer and environments are checked before `workdir` is created, so a run that cannot
    start leaves nothing behind. Ctrl-C during a train step or a checkpoint save takes effect
    when it ends (`interrupts.deferred_interrupts`).
    """
    EpisodeSettings.from_config(config)  # refuses bad agent settings before anything starts
    workdir = Path(workdir).resolve()
    tasks = list(tasks) if tasks is not None else load_task_list(config)
    tokenizer = load_tokenizer(config)
    check_train_config(config, tasks, sampler_given=sampler is not None)
    primary = is_primary_process()
    rules = sharding_rules(config)
    trainer = make_trainer(config, rules)
    with contextlib.ExitStack() as stack:
        runner = stack.enter_context(asyncio.Runner())
        if env_pool is None:  # before the model loads: a missing Docker engine fails fast
            env_pool = make_env_pool(config, run_label=f"train-{workdir.name}")
            stack.callback(lambda: runner.run(env_pool.close()))
            prepare_task_images(env_pool, tasks)  # missing images: fail before any rollout
        workdir.mkdir(parents=True, exist_ok=True)
        if primary:
            save_config(config, workdir)
        checkpoints = stack.enter_context(
            TrainCheckpoints(
                workdir / CHECKPOINT_DIR,
                every=config.checkpoint.every,
                keep=config.checkpoint.keep,
                async_save=config.checkpoint.async_save,
            )
        )
        run = restore_or_init(config, trainer, checkpoints, rules)
        if sampler is None:
            sampler = make_sampler(
                config, trainer, run.train_state.params, rules, sampler_seed(run)
            )
            stack.callback(sampler.close)
        writer = (
            stack.enter_context(MetricsWriter(workdir, resume_step=run.iteration))
            if primary
            else None
        )
        tasks_consumed = run.tasks_consumed

        async def collect(iteration: int, policy_version: int) -> tuple[list[Trajectory], int]:
            """This process's share of the iteration's rollouts, and the task stream position."""
            nonlocal tasks_consumed
            iteration_tasks, tasks_consumed = tasks_for_iteration(
                tasks, seed=config.seed, position=tasks_consumed, count=config.rl.tasks_per_step
            )
            trajectories = await collect_rollouts(
                rollout_share(iteration_tasks, config.sampler.processes_per_engine),
                config.rl.n_rollouts,
                env_pool,
                sampler,
                tokenizer,
                config,
                policy_version=policy_version,
                show_progress=show_progress and primary,
            )
            return trajectories, tasks_consumed

        overlap = config.rl.get("overlap", False)
        scheduler = stack.enter_context(
            RolloutScheduler(
                runner,
                collect,
                sampler.sync_weights,
                max_staleness=config.rl.get("max_staleness", 1) if overlap else 0,
                start=run.iteration,
                stop=config.rl.total_steps,
            )
        )
        state = run.train_state
        scheduler.publish(run.iteration, published_weights(state.params, sampler))
        for iteration in range(run.iteration, config.rl.total_steps):
            started = time.perf_counter()
            timings: dict[str, float] = {}
            with timed(timings, "time/rollout_wait_s"):
                rollouts = scheduler.next_batch(iteration)
            # The last save is finished (it had the rollouts' time) and checked before the next
            # update: a failed save stops the run here, not a step later.
            checkpoints.wait_until_finished()
            local_trajectories, position = rollouts.result
            trajectories = gather_trajectories(local_trajectories)
            if primary:
                write_trajectories(trajectories_path(workdir, iteration), trajectories)
            require_usable_episodes(trajectories, iteration)
            if not overlap:  # frees a colocated vLLM engine's memory for the train step
                sampler.sleep()
            with timed(timings, "time/train_s"), deferred_interrupts():
                state, update_metrics = scheduler.run_while_collecting(
                    update_policy, trainer, state, trajectories, config
                )
            step = iteration + 1
            scheduler.publish(step, published_weights(state.params, sampler))
            with timed(timings, "time/checkpoint_s"), deferred_interrupts():
                saving = checkpoints.save(
                    step,
                    params=state.params,
                    opt_state=state.opt_state,
                    rng_key=run.rng_key,
                    data_position={"tasks_consumed": position, "optimizer_steps": int(state.step)},
                    config=config,
                    force=step == config.rl.total_steps,
                )
            metrics = {
                **rollout_metrics(trajectories),
                **update_metrics,
                **timings,
                "time/sync_s": rollouts.sync_s,
                "time/rollout_s": rollouts.rollout_s,
                "time/iteration_s": time.perf_counter() - started,
                "rollout/policy_lag": float(iteration - rollouts.policy_version),
            }
            metrics.update(env_pool.metrics())
            if primary:
                writer.write(step, metrics)
                log_progress(step, config.rl.total_steps, metrics, saving=saving)
        with deferred_interrupts():
            checkpoints.wait_until_finished()
    return state
