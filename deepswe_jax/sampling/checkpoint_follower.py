"""Disaggregated sampling: a sampler process that serves the trainer's newest Orbax checkpoint.

The trainer saves `<workdir>/checkpoints/<step>/` (rl/loop.py); a sampler process on other
hosts, with its own mesh (any shape), follows that directory:

    follower = CheckpointFollower(
        workdir / "checkpoints", nnx.eval_shape(make_model), mesh=make_mesh(1, 2, 1),
        rules=DEFAULT_RULES, make_sampler=lambda model: JaxSampler(model, mesh=...),
    )
    follower.poll()                  # restores the newest finished step onto `mesh`
    follower.policy_version          # the step it serves (None before the first checkpoint)
    await follower.sampler.generate(requests)

experiment.checkpoint_follower builds one from a config. The trainer never waits on a
follower: a step folder appears only once Orbax has written it completely, and the follower
picks it up at its next poll. The version it reports is the
checkpoint step (optimizer updates behind the weights), the number trajectories record as
policy_version, so a trainer can hold sampled data to its max_staleness bound.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh

from deepswe_jax.checkpoint import restore_params, restore_target
from deepswe_jax.model import Qwen3ForCausalLM
from deepswe_jax.parallel import state_shardings
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.sampling.base import Sampler

logger = logging.getLogger(__name__)

SamplerFactory = Callable[[Qwen3ForCausalLM], Sampler]


class CheckpointFollower:
    """Keeps a sampler on this process's mesh serving the newest step of a checkpoint directory.

    Args:
      checkpoint_dir: the trainer's checkpoint directory (<workdir>/checkpoints).
      model: the policy's architecture (e.g. nnx.eval_shape of its constructor: dtypes, remat).
      mesh, rules: where this process samples and how parameters are laid out there; the mesh
        need not match the trainer's.
      make_sampler: model -> Sampler, called once with the first restored model; later steps
        go through `sampler.sync_weights`.
      status_file: where `poll` reports the served version as json ({"policy_version",
        "checkpoint", "updated_unix_s"}), for trainers and dashboards; None = no file.
    """

    def __init__(
        self,
        checkpoint_dir: str | os.PathLike,
        model: Qwen3ForCausalLM,
        *,
        mesh: Mesh,
        rules: Rules,
        make_sampler: SamplerFactory,
        status_file: str | os.PathLike | None = None,
    ):
        self.checkpoint_dir = Path(checkpoint_dir).resolve()
        self.mesh = mesh
        self._make_sampler = make_sampler
        self._status_file = Path(status_file) if status_file is not None else None
        self.graphdef, abstract = nnx.split(model, nnx.Param)
        self._target = restore_target(abstract, state_shardings(abstract, mesh, rules))
        self._manager = ocp.CheckpointManager(
            self.checkpoint_dir, options=ocp.CheckpointManagerOptions(read_only=True)
        )
        self.sampler: Sampler | None = None
        self.policy_version: int | None = None

    def latest_step(self) -> int | None:
        """The newest fully written step in the directory now (None while there is none)."""
        self._manager.reload()
        return self._manager.latest_step()

    def poll(self) -> int | None:
        """Restores the newest step if it is newer than the one served; returns that step, or
        None when nothing changed."""
        step = self.latest_step()
        if step is None or (self.policy_version is not None and step <= self.policy_version):
            return None
        directory = self.checkpoint_dir / str(step)
        params = restore_params(directory, self._target)
        if self.sampler is None:
            self.sampler = self._make_sampler(nnx.merge(self.graphdef, params))
        else:
            self.sampler.sync_weights(params)
        self.policy_version = step
        if self._status_file is not None:
            status = {
                "policy_version": step,
                "checkpoint": str(directory),
                "updated_unix_s": time.time(),
            }
            temporary = self._status_file.with_suffix(".tmp")
            temporary.write_text(json.dumps(status))
            temporary.replace(self._status_file)  # readers never see a half-written file
        logger.info("serving policy version %d from %s", step, directory)
        return step

    def wait_for_first(self, timeout_s: float, interval_s: float = 1.0) -> int:
        """Polls until a first step is served; raises TimeoutError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while self.poll() is None and self.policy_version is None:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"no finished checkpoint appeared in {self.checkpoint_dir} within "
                    f"{timeout_s:.0f}s; is the trainer running with this --workdir?"
                )
            time.sleep(interval_s)
        return self.policy_version

    def follow(self, stop: threading.Event, interval_s: float = 5.0) -> None:
        """Polls every `interval_s` seconds until `stop` is set (run it in a thread)."""
        while not stop.wait(interval_s):
            try:
                self.poll()
            except Exception:  # a step deleted under us (keep=n): keep serving, retry next poll
                logger.exception("could not restore the newest checkpoint; retrying")

    def close(self) -> None:
        self._manager.close()
        if self.sampler is not None:
            self.sampler.close()
