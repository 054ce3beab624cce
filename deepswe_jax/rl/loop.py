"""The outer RL loop: roll out, grade, build the batch, update the policy, log, checkpoint.

    train(run_dir=..., trainer=..., env_pool=..., tasks=..., ...)   # experiment.train builds
                                                                   # the parts from a config

Iteration k (0-based; its result is checkpoint step k + 1):

    tasks = tasks_for_iteration(...)           next tasks of a seeded per-epoch shuffle
    sampler.sync_weights(params)               rollouts sample from the current policy
    trajectories = collect_rollouts(tasks, n)  episodes in containers, graded in fresh ones
    state = update_policy(...)                 advantages + compact filter + batch, optimizer step(s)
    metrics -> metrics.jsonl and tensorboard/; checkpoint every k steps (RunDirectory)

The loop runs `settings.total_steps` iterations with `settings.update.num_iterations` optimizer
steps per batch (DeepSWE: 1). With `settings.overlap`, iteration k+1's rollouts run while
iteration k trains, sampling a policy at most `settings.max_staleness` updates old
(rl/overlap.py). Several processes (jax.distributed) each roll out their share of the tasks,
share the trajectories, feed their own rows of the batch and save checkpoints together;
process 0 alone writes config, metrics and trajectory files. Workdir layout: RunDirectory's,
plus trajectories/iter_XXXXXX.jsonl. Started again on the same workdir, a run resumes from its
latest finished checkpoint: parameters, optimizer state, step, RNG key and task-stream
position; it then redoes the iterations after that step exactly as before when sampling and
environments are deterministic (scripted sampler, fixed seeds).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Sequence

import jax
import numpy as np
from flax import nnx

from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.rollout import EpisodeSettings, RolloutContext, collect_rollouts
from deepswe_jax.agent.trajectory import Trajectory, trajectories_path, write_trajectories
from deepswe_jax.env.protocols import EnvPoolProtocol
from deepswe_jax.env.tasks import Task
from deepswe_jax.interrupts import deferred_interrupts
from deepswe_jax.parallel.distributed import allgather_bytes, host_copy, process_local_record
from deepswe_jax.rl.batch import TrainBatch, assemble_batch
from deepswe_jax.rl.curve import DropWatch, iteration_reward
from deepswe_jax.rl.metrics import batch_metrics, rollout_metrics
from deepswe_jax.rl.overlap import RolloutScheduler
from deepswe_jax.rl.run_directory import RunDirectory, RunState
from deepswe_jax.rl.train_step import Trainer, TrainState
from deepswe_jax.sampling.base import Sampler

logger = logging.getLogger(__name__)

# (the policy's parameters, a seed) -> the sampler rollouts generate with.
SamplerFactory = Callable[[nnx.State, int], Sampler]


@dataclasses.dataclass(frozen=True)
class UpdateSettings:
    """How a batch of trajectories becomes optimizer steps (config.rl).

    micro_batch_size: rows per gradient-accumulation step, across all devices. advantage:
    'loo' | 'grpo' | 'drgrpo'. compact_filtering: mask episodes a budget stopped (DeepSWE).
    length_buckets: the row lengths batches are padded to (rl.batch.row_length_buckets).
    num_iterations: passes over the batch (verl's ppo_epochs; DeepSWE: 1). mini_batches: each
    pass is this many optimizer steps on consecutive task groups, each normalised on its own
    (verl's ppo_mini_batch_size = tasks per step / mini_batches; 1 = one step per pass).
    """

    micro_batch_size: int
    advantage: str = "loo"
    compact_filtering: bool = True
    length_buckets: tuple[int, ...] = ()
    num_iterations: int = 1
    mini_batches: int = 1


@dataclasses.dataclass(frozen=True)
class LoopSettings:
    """The RL loop's schedule (config.rl and config.seed): `total_steps` iterations of
    `tasks_per_step` tasks with `n_rollouts` episodes each; the task stream is shuffled with
    `seed`; `overlap` rolls out iteration k+1 during iteration k's update, from a policy at most
    `max_staleness` updates old; `processes_per_engine` processes share one sampler, whose
    first rolls out for them (`rollout_share`)."""

    total_steps: int
    tasks_per_step: int
    n_rollouts: int
    update: UpdateSettings
    seed: int = 0
    overlap: bool = False
    max_staleness: int = 1
    processes_per_engine: int = 1


def check_tasks_per_step(count: int, num_tasks: int, source: str = "") -> None:
    """Raises ValueError unless an iteration of `count` distinct tasks can be drawn from
    `num_tasks` tasks; `source` follows the number of tasks in the message (where they come
    from)."""
    if not 0 < count <= num_tasks:
        raise ValueError(
            f"config.rl.tasks_per_step={count} must be between 1 and the number of tasks "
            f"({num_tasks}{source}); each task of a step gets its own rollout group"
        )


def tasks_for_iteration(
    tasks: Sequence[Task], *, seed: int, position: int, count: int
) -> tuple[list[Task], int]:
    """The next `count` distinct tasks of the task stream, and the stream position after them.

    The stream is epoch after epoch of `tasks`, each epoch a permutation drawn from
    (seed, epoch), so the tasks of any iteration follow from `seed` and `position` alone.
    A task that would repeat within one iteration (near an epoch boundary) is skipped.
    """
    check_tasks_per_step(count, len(tasks))
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


def update_batch(trajectories: Sequence[Trajectory], settings: UpdateSettings) -> TrainBatch:
    """The batch `update_policy` trains on: advantages, compact filter, rows padded to a length
    bucket, split into `settings.mini_batches` mini-batches."""
    return assemble_batch(
        trajectories,
        micro_batch_size=settings.micro_batch_size,
        advantage=settings.advantage,
        compact_filtering=settings.compact_filtering,
        length_buckets=settings.length_buckets,
        mini_batches=settings.mini_batches,
    )


def update_policy(
    trainer: Trainer,
    state: TrainState,
    trajectories: Sequence[Trajectory],
    settings: UpdateSettings,
) -> tuple[TrainState, dict[str, float]]:
    """Batch the trajectories (advantages, compact filter, rows padded to a length bucket) and
    take `settings.num_iterations` passes over them, each `settings.mini_batches` optimizer
    steps on consecutive task groups (verl's dp_actor.update_policy: for each epoch, for each
    mini-batch, one step); a batch without loss tokens is skipped (train/skipped = 1).

    Returns the new state and the batch metrics plus the last step's train/ metrics and the
    number of optimizer steps taken (train/optimizer_steps).
    """
    batch = update_batch(trajectories, settings)
    metrics = batch_metrics(batch.stats, len(batch.micro_batches))
    if not batch.micro_batches:
        return state, {**metrics, "train/skipped": 1.0}
    # Every process built the same global batch; each feeds the rows its devices hold.
    micro_batches = [process_local_record(mb, trainer.batch_sharding) for mb in batch.micro_batches]
    sizes = batch.mini_batch_sizes or (len(micro_batches),)
    starts = np.cumsum((0, *sizes)).tolist()
    old_logprobs = None
    if settings.num_iterations > 1 or len(sizes) > 1:
        # Several updates per batch: every one clips against the pre-update policy (verl
        # computes old_log_probs once, before the mini-batch loop).
        old_logprobs = [trainer.logprobs(state.params, mb) for mb in micro_batches]
    steps = 0
    for _ in range(settings.num_iterations):
        for start, stop in zip(starts[:-1], starts[1:], strict=True):
            old = None if old_logprobs is None else old_logprobs[start:stop]
            state, train_metrics = trainer.step(state, micro_batches[start:stop], old)
            steps += 1
    return state, {
        **metrics,
        "train/skipped": 0.0,
        "train/optimizer_steps": float(steps),
        **{f"train/{key}": value for key, value in train_metrics.items()},
    }


def rollout_share(tasks: Sequence[Task], processes_per_engine: int) -> list[Task]:
    """This process's share of an iteration's tasks: they are split among the processes that
    own a sampler (all, or the first of each group of `processes_per_engine`). A task goes
    whole to one process, so its n rollouts and every turn of each reach one sampler, the one
    holding their prefixes (session affinity: vLLM's prefix cache and JaxSampler's are per
    engine)."""
    group, member = divmod(jax.process_index(), processes_per_engine)
    if member:
        return []
    return list(tasks[group :: jax.process_count() // processes_per_engine])


@contextlib.contextmanager
def timed(timings: dict[str, float], name: str) -> Iterator[None]:
    """Adds the block's wall-clock seconds to `timings[name]`."""
    started = time.perf_counter()
    try:
        yield
    finally:
        timings[name] = time.perf_counter() - started


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
    sampler that extracts what it needs from the sharded params itself
    (`Sampler.syncs_global_arrays`, the vLLM sampler) gets them as they are."""
    if sampler.syncs_global_arrays or jax.process_count() == 1:
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
    *,
    run_dir: RunDirectory,
    trainer: Trainer,
    initial_params: Callable[[], nnx.State],
    make_sampler: SamplerFactory,
    env_pool: EnvPoolProtocol,
    tasks: Sequence[Task],
    tokenizer: ChatTokenizer,
    episode: EpisodeSettings,
    settings: LoopSettings,
    show_progress: bool = True,
) -> TrainState:
    """Runs (or resumes) the RL loop of the module docstring in the entered `run_dir`; returns
    the final state.

    initial_params: the starting policy's parameters, called only when there is no checkpoint.
    make_sampler: called once, with the (restored) trainer parameters on every process (a
    collective with several processes) and a seed; the caller closes what it makes, and
    `env_pool`.
    """
    run = run_dir.restore_or_init(trainer, initial_params, settings.seed)
    sampler = make_sampler(run.train_state.params, sampler_seed(run))
    rollout_context = RolloutContext(env_pool, sampler, tokenizer, episode)
    run_dir.open_metrics(run.iteration)
    primary = run_dir.primary
    tasks_consumed = run.tasks_consumed

    async def collect(iteration: int, policy_version: int) -> tuple[list[Trajectory], int]:
        """This process's share of the iteration's rollouts, and the task stream position."""
        nonlocal tasks_consumed
        iteration_tasks, tasks_consumed = tasks_for_iteration(
            tasks, seed=settings.seed, position=tasks_consumed, count=settings.tasks_per_step
        )
        trajectories = await collect_rollouts(
            rollout_context,
            rollout_share(iteration_tasks, settings.processes_per_engine),
            settings.n_rollouts,
            policy_version=policy_version,
            show_progress=show_progress and primary,
        )
        return trajectories, tasks_consumed

    with contextlib.ExitStack() as stack:
        runner = stack.enter_context(asyncio.Runner())
        scheduler = stack.enter_context(
            RolloutScheduler(
                runner,
                collect,
                sampler.sync_weights,
                max_staleness=settings.max_staleness if settings.overlap else 0,
                start=run.iteration,
                stop=settings.total_steps,
            )
        )
        state = run.train_state
        drops = DropWatch()  # warns when an iteration's reward falls far below the best
        scheduler.publish(run.iteration, published_weights(state.params, sampler))
        for iteration in range(run.iteration, settings.total_steps):
            started = time.perf_counter()
            timings: dict[str, float] = {}
            with timed(timings, "time/rollout_wait_s"):
                rollouts = scheduler.next_batch(iteration)
            # The last save is finished (it had the rollouts' time) and checked before the next
            # update: a failed save stops the run here, not a step later.
            run_dir.wait_until_finished()
            local_trajectories, position = rollouts.result
            trajectories = gather_trajectories(local_trajectories)
            if primary:
                write_trajectories(trajectories_path(run_dir.workdir, iteration), trajectories)
            require_usable_episodes(trajectories, iteration)
            if not settings.overlap:  # frees a colocated vLLM engine's memory for the train step
                sampler.sleep()
            with timed(timings, "time/train_s"), deferred_interrupts():
                state, update_metrics = scheduler.run_while_collecting(
                    update_policy, trainer, state, trajectories, settings.update
                )
            step = iteration + 1
            scheduler.publish(step, published_weights(state.params, sampler))
            # One block for the signals: a step that is saved has its metrics row (a Ctrl-C
            # here let the save finish, and the rerun resumes after this step).
            with deferred_interrupts():
                with timed(timings, "time/checkpoint_s"):
                    saving = run_dir.save(
                        step,
                        state,
                        run.rng_key,
                        {"tasks_consumed": position},
                        force=step == settings.total_steps,
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
                run_dir.write_metrics(step, metrics)
            drop = drops.observe(iteration_reward({"step": step, **metrics}))
            if primary:
                log_progress(step, settings.total_steps, metrics, saving=saving)
                if drop is not None:
                    logger.warning("collapse? %s", drop)
        with deferred_interrupts():
            run_dir.wait_until_finished()
    return state
