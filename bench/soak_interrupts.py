"""Ctrl-C soak of the main job (issue 26): interrupt it at many moments, rerun it each time, and
check that nothing was lost.

  python bench/soak_interrupts.py --moments=30 --root=/tmp/soak      # BENCHMARKS.md's soak
  python bench/soak_interrupts.py --moments=5 --markers --root=...   # the five marker moments
                                                                      # (in CI: tests/bench/test_soak_interrupts.py)

The job is run.sh's three stages (expert data + SFT, GRPO++, held-out evaluation) of
configs/learn_tiny.py, shrunk by `SMALL` so all three run in a few minutes. Each moment runs the
job from the first stage, as a user reruns ./run.sh (a finished stage is skipped, an unfinished
one resumes), and sends Ctrl-C (SIGINT, to the process group, as a terminal does; one, two or
three times) into the stage running at that moment:

  random moments   stage s and a delay d drawn from --seed: the signals go d seconds after
                   stage s started (d up to that stage's time in the reference run)
  --markers        the signals go when a stage prints a given line (`MARKERS`): the SFT's
                   start, its steps, the RL's rollouts and the train step after them, the
                   evaluation's episodes, so the moments are the same on every machine; none
                   while containers start (EnvPool's race, BENCHMARKS.md "Ctrl-C soak")

A moment that comes after its stage has ended (a resumed stage is short) lets the job finish,
and is tried once more in a new job in a fresh folder, whose stages run whole (each finished job
is checked at the end like the last). After each interruption: exit status 130, one line of output (progress lines aside), no
container of that process left, no `*.orbax-checkpoint-tmp*` folder, no `.partial` or `.tmp`
file. A signal that comes while Python itself starts, before the script's first line, kills the
process silently (before the interpreter's handler exists) or gets Python's own KeyboardInterrupt
traceback (while it loads site-packages), which no script can prevent; nothing of the run exists
yet, so it is listed apart (`in_python_startup`), not as a problem, as long as nothing is left
behind. Then the job runs to the end and must have one metrics row per step in each stage, an
evaluation summary, and the final parameters of an uninterrupted run (--reference, run first
in <root>/reference unless given, or --no_reference): SFT's exactly; GRPO++'s differ (the JaxSampler draws one key
per decode step of its continuous batch, and which episodes share a step depends on when their
containers answer, so two uninterrupted runs of one seed differ too), which the report shows
rather than fails on.

Prints one json report (and writes it to <root>/soak.json).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

CONFIG = "configs/learn_tiny.py"
RL_STEPS = 2
# learn_tiny, small enough for many reruns: 4 SFT steps, 2 GRPO++ iterations of 2 tasks x 2
# rollouts (one optimizer step each), checkpoints every 2 steps, 1 held-out task x 2 runs.
SMALL = (
    "--config.sft.num_steps=4",
    f"--config.rl.total_steps={RL_STEPS}",
    "--config.rl.n_rollouts=2",
    "--config.rl.num_iterations=1",
    "--config.rl.mini_batches=1",
    "--config.rl.micro_batch_size=8",
    "--config.checkpoint.every=2",
)
STAGES = ("sft", "rl", "eval")
EVAL_TASKS = "dials-buta"
# (stage, regular expression on its output): --markers' moments.
MARKERS = (
    ("sft", r"selected \d+ trajectories"),
    ("sft", r"sft step \d+/"),
    ("rl", r"rollouts v\d+:.*\| [1-4]/4 \["),
    ("rl", r"rollouts v\d+:.*\| 4/4 \["),  # episodes done: the train step follows
    ("eval", r"eval .*\| [01]/2 \["),  # an episode still to run (after 2/2 the stage may end first)
)
NOISE = re.compile(r"^I\d{4} \d\d:\d\d:\d\d|\d+%\||^\s*$")  # absl INFO lines, progress bars
# A shell without job control starts background commands (`.ci/run &`) with SIGINT ignored, and
# children inherit that: a stage, which stands for a terminal's foreground job, is started through
# this, which gives SIGINT its default action again and execs the command (no preexec_fn: the
# reader threads make fork + Python code unsafe).
FOREGROUND = (
    sys.executable,
    "-S",  # no site-packages: the trampoline's own start-up is short and imports nothing
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
)
INTERRUPTED = re.compile(r"^interrupted \(SIGINT\): stopped cleanly")
# How long a stage may run, and how long an interrupted one may take to stop, before it counts
# as hung: its threads' stacks are then the problem reported (the CI soak of stop 33 waited 30
# minutes for a run that never exited, and showed nothing of where it was).
STAGE_TIMEOUT_S = 1200
STOP_TIMEOUT_S = 300


def stage_command(stage: str, root: Path) -> list[str]:
    python = [sys.executable]
    if stage == "sft":
        return [
            *python,
            "launch/train_sft.py",
            f"--config={CONFIG}",
            f"--workdir={root / 'sft'}",
            "--expert_tasks=tasks/oneline/train_small.jsonl",
            *SMALL,
        ]
    if stage == "rl":
        return [
            *python,
            "launch/train.py",
            f"--config={CONFIG}",
            f"--workdir={root / 'rl'}",
            f"--config.init_from={root / 'sft' / 'checkpoints'}",
            *SMALL,
        ]
    return [
        *python,
        "launch/evaluate.py",
        f"--config={CONFIG}",
        f"--policy={root / 'rl' / 'checkpoints'}",
        "--tasks=tasks/oneline/held_out.jsonl",
        f"--instance_ids={EVAL_TASKS}",
        "--num_runs=2",
        f"--output_dir={root / 'eval'}",
        *SMALL,
    ]


class StageProcess:
    """One stage's process (or `command`) in its own process group, its stderr read as lines
    (split at \\r too: progress bars), waiting possible for a line matching a pattern."""

    def __init__(self, stage: str, root: Path, command: list[str] | None = None):
        from deepswe_jax.env.ownership import owner_label

        env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
        self.process = subprocess.Popen(
            [*FOREGROUND, *(command or stage_command(stage, root))],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.owner = owner_label(self.process.pid)  # its containers' deepswe.owner label
        self.started = time.monotonic()
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buffer = b""
        while chunk := self.process.stderr.read1(65536):
            buffer += chunk
            *complete, buffer = re.split(rb"[\r\n]", buffer)
            with self._changed:
                self.lines += [line.decode(errors="replace") for line in complete]
                self._changed.notify_all()
        with self._changed:
            self.lines.append(buffer.decode(errors="replace"))
            self._changed.notify_all()

    def wait_for(self, pattern: str | None, delay: float | None) -> bool:
        """Until a line matches `pattern`, or `delay` seconds after the start; False when the
        process ended first."""
        regex = re.compile(pattern) if pattern else None
        with self._changed:
            while self.process.poll() is None:
                if regex and any(regex.search(line) for line in self.lines):
                    return True
                if delay is not None and time.monotonic() - self.started >= delay:
                    return True
                self._changed.wait(0.05)
        return False

    def interrupt(self, times: int) -> None:
        for _ in range(times):
            try:
                os.killpg(self.process.pid, signal.SIGINT)
            except ProcessLookupError:
                return
            time.sleep(0.3)

    def finish(self, timeout: float = STAGE_TIMEOUT_S) -> tuple[int | None, list[str]]:
        """Exit status and the output lines that are not progress. A process still running after
        `timeout` seconds prints every thread's stack (interrupts.STACKS_SIGNAL: the lines end
        with them) and is killed, with its containers; its status is then None."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGUSR1)
                time.sleep(3)
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            remove_containers(self.owner)
            code = None
        self._reader.join(timeout=60)
        return code, [line for line in self.lines if not NOISE.search(line)]


@dataclasses.dataclass
class Moment:
    stage: str
    pattern: str | None = None
    delay: float | None = None
    signals: int = 1


def in_python_startup(code: int, lines: list[str]) -> bool:
    """Whether the signal came while Python itself started, before the script's first line:
    - killed by SIGINT's default action (status -2, as a shell's 130) with no output: before
      the interpreter installed its handler (or in the trampoline, `FOREGROUND`), or after the
      stage had finished, while the interpreter tore down (it puts the default action back;
      seen 3 times in ~100 stage ends here: the stage's work was all saved, and the rerun
      checks it);
    - Python's own KeyboardInterrupt traceback through no file of this repository (./run.sh's
      .venv inside it aside): while it loaded site-packages and their .pth files.
    No script can act then, and nothing of the run exists yet to lose."""
    if code == -signal.SIGINT and not lines:
        return True
    frames = [line for line in lines if line.lstrip().startswith("File ")]
    return (
        bool(lines)
        and lines[-1].strip() == "KeyboardInterrupt"
        and bool(frames)
        and not any(str(REPO_ROOT) in f and "site-packages" not in f for f in frames)
    )


def remove_containers(owner: str) -> None:
    """Removes the containers of a process that was killed (no cleanup of its own ran)."""
    import docker

    client = docker.from_env()
    for container_id in containers_of(owner):
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            client.api.remove_container(container_id, force=True)


def containers_of(owner: str) -> list[str]:
    import docker

    from deepswe_jax.env.ownership import OWNER_LABEL

    client = docker.from_env()
    # sparse: no inspection of each container, which races its removal (404)
    found = client.containers.list(
        all=True, sparse=True, filters={"label": f"{OWNER_LABEL}={owner}"}
    )
    return [container.id[:12] for container in found]


def leftovers(root: Path) -> list[str]:
    """Temporary checkpoint folders and half-written files under `root`."""
    return sorted(
        str(path.relative_to(root))
        for path in root.rglob("*")
        if "orbax-checkpoint-tmp" in path.name or path.name.endswith((".partial", ".tmp"))
    )


def run_job(root: Path, moment: Moment | None = None) -> dict:
    """The three stages in order; with `moment`, interrupted there. Returns what happened."""
    timings = {}
    for stage in STAGES:
        process = StageProcess(stage, root)
        if moment is not None and moment.stage == stage:
            if process.wait_for(moment.pattern, moment.delay):
                at = time.monotonic() - process.started
                process.interrupt(moment.signals)
                code, lines = process.finish(STOP_TIMEOUT_S)
                problems = []
                before_script = code is not None and in_python_startup(code, lines)
                if code is None:
                    problems.append(f"no exit {STOP_TIMEOUT_S} s after the signals: {lines[-80:]}")
                elif not before_script and (
                    code != 130 or len(lines) != 1 or not INTERRUPTED.match(lines[0])
                ):
                    problems.append(f"exit status {code}, output {lines[-20:]}")
                if containers_of(process.owner):
                    problems.append(f"containers left: {containers_of(process.owner)}")
                if leftovers(root):
                    problems.append(f"left behind: {leftovers(root)}")
                result = {"stage": stage, "at_s": round(at, 1), "problems": problems}
                return {**result, "in_python_startup": True} if before_script else result
            moment = None  # the stage ended before the moment: the job goes on uninterrupted
        code, lines = process.finish()
        if code != 0:
            raise RuntimeError(f"stage {stage} failed ({code}): {lines[-20:]}")
        timings[stage] = round(time.monotonic() - process.started, 1)
    return {"stage": None, "timings_s": timings}


def params_hash(checkpoints: Path) -> str:
    """sha256 of the newest step's parameters (array bytes in path order)."""
    import jax
    import numpy as np
    from flax import nnx

    from configs import learn_tiny
    from deepswe_jax.checkpoint import restore_params
    from deepswe_jax.experiment import model_factory
    from deepswe_jax.parallel import make_mesh

    abstract = nnx.split(nnx.eval_shape(model_factory(learn_tiny.get_config())), nnx.Param)[1]
    mesh = make_mesh(1, 1, 1, devices=jax.devices()[:1])
    params = nnx.to_pure_dict(restore_params(checkpoints, abstract, mesh=mesh))
    digest = hashlib.sha256()
    for path, leaf in jax.tree_util.tree_flatten_with_path(params)[0]:
        digest.update(jax.tree_util.keystr(path).encode())
        digest.update(np.asarray(leaf).tobytes())
    return digest.hexdigest()[:16]


def job_outcome(root: Path) -> dict:
    from deepswe_jax.rl.metrics import read_metrics

    return {
        "sft_metric_steps": [row["step"] for row in read_metrics(root / "sft")],
        "rl_metric_steps": [row["step"] for row in read_metrics(root / "rl")],
        "eval_summary": (root / "eval" / "summary.json").exists(),
        "sft_params": params_hash(root / "sft" / "checkpoints"),
        "rl_params": params_hash(root / "rl" / "checkpoints"),
    }


def moments(count: int, *, markers: bool, seed: int, timings: dict) -> list[Moment]:
    rng = random.Random(seed)
    if markers:
        return [
            Moment(stage, pattern=pattern, signals=1 + i % 3)
            for i, (stage, pattern) in zip(range(count), MARKERS * count, strict=False)
        ]
    drawn = []
    for _ in range(count):
        stage = rng.choice(STAGES)
        drawn.append(
            Moment(stage, delay=rng.uniform(0, timings[stage]), signals=rng.choice((1, 2, 3)))
        )
    return drawn


def soak(
    root: Path, count: int, *, markers: bool, seed: int, reference: Path | None | bool = None
) -> dict:
    """The soak of the module docstring in `root`; reference: an uninterrupted job's root, None
    to run one first, False for none (no parameter comparison)."""
    root.mkdir(parents=True, exist_ok=True)
    report: dict = {"moments": count, "markers": markers, "seed": seed}
    if reference is None:
        reference = root / "reference"
        started = time.monotonic()
        report["reference_timings_s"] = run_job(reference)["timings_s"]
        report["reference_s"] = round(time.monotonic() - started, 1)
    timings = report.get("reference_timings_s") or {stage: 60.0 for stage in STAGES}
    jobs = [root / "job_0"]
    results = []
    started = time.monotonic()
    for moment in moments(count, markers=markers, seed=seed, timings=timings):
        # A moment that comes after its stage ended (a resumed stage is short) lets the job
        # finish; it is tried once more in a new job, whose stages run whole.
        for _ in range(2):
            result = run_job(jobs[-1], moment)
            result.update(signals=moment.signals, moment=moment.pattern or round(moment.delay, 1))
            results.append(result)
            print(json.dumps(result), flush=True)
            if result["stage"] is not None:
                break
            jobs.append(root / f"job_{len(jobs)}")  # the job finished: the next starts anew
    report["final_timings_s"] = run_job(jobs[-1])["timings_s"]
    report["soak_s"] = round(time.monotonic() - started, 1)
    report["jobs"] = {job.name: job_outcome(job) for job in jobs if job.exists()}
    report["interrupted"] = sum(r["stage"] is not None for r in results)
    report["by_stage"] = {s: sum(r["stage"] == s for r in results) for s in STAGES}
    report["problems"] = [r for r in results if r.get("problems")]
    report["in_python_startup"] = [r for r in results if r.get("in_python_startup")]
    if reference is not False:
        report["reference"] = job_outcome(reference)
    (root / "soak.json").write_text(json.dumps(report, indent=2))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--moments", type=int, default=30)
    parser.add_argument("--markers", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--reference", type=Path, default=None)
    parser.add_argument("--no_reference", action="store_true", help="skip the reference run")
    args = parser.parse_args()
    reference = False if args.no_reference else args.reference
    report = soak(
        args.root, args.moments, markers=args.markers, seed=args.seed, reference=reference
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
