"""Run a config's sweep: one training run per override dict of its `get_sweep()` (big_vision style).

  python launch/sweep.py --config=configs/tiny.py --workdir=/tmp/tiny_sweep            # here, in turn
  python launch/sweep.py --config=configs/tiny.py --workdir=/shared/sweeps/lr \
      --mode=print --scheduler=slurm --nodes=8 --gpus_per_node=8      # sbatch lines
  python launch/sweep.py --config=configs/tiny.py --workdir=/shared/sweeps/lr \
      --mode=print --scheduler=k8s --k8s_image=registry/deepswe-jax:v1 | kubectl apply -f -

A config file defines, next to `get_config()`:

  def get_sweep() -> list[dict]:
      return [{"rl.lr": lr} for lr in (1e-4, 3e-4, 1e-3)]

Each run gets a name made of its overrides ("lr=0.0001") and the workdir <workdir>/<name>;
`--set=key=value` (repeatable) applies to every run. Local mode runs `launch/train.py` with
`--config.key=value` overrides one run after another (output in <workdir>/<name>/train.log)
and records each run in <workdir>/sweep.json; a run that fails does not stop the others,
but the sweep exits non-zero. Local runs share a JAX compilation cache (<workdir>/jax_cache). Print mode writes one launch command per run: `sbatch` lines
(the job runs one task per node, `srun python launch/train.py ...`, so multi-host JAX finds
SLURM's variables, with JAX_LOCAL_DEVICE_IDS naming all the node's GPUs for its one process)
or Kubernetes Job manifests (YAML documents; the workdir must be on storage the pods mount),
built by launch/k8s/manifests.py's `training_job` like the cluster's own training Job: run as
the deepswe-trainer service account of --k8s_namespace (apply launch/k8s_manifests.py's RBAC
there first), so runs with --set=env.backend=kubernetes may create their env pods.
"""

import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# Run as a script (python launch/sweep.py), the repository root is not on sys.path; configs/ live there.
sys.path.insert(0, str(REPO_ROOT))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.parallel.distributed import LOCAL_DEVICE_IDS_VARIABLE  # noqa: E402

NAME_LIMIT = 100  # longer run names are cut and end in a hash of the full name
K8S_NAME_LIMIT = 63


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: its name, workdir and config overrides (dotted key -> value text)."""

    name: str
    workdir: str
    overrides: tuple[tuple[str, str], ...]


def format_value(value: Any) -> str:
    """How `value` is written after `--config.key=` (ml_collections' config_flags parses it)."""
    if isinstance(value, (tuple, list)):
        return repr(tuple(value))
    return str(value)


def check_key(config: Any, key: str, where: str) -> None:
    """Raises ValueError unless dotted `key` names an existing field of `config`."""
    reason = cli.unknown_field(config, key)
    if reason is not None:
        raise ValueError(f"{where} sets {key!r}, but {reason}")


def run_name(overrides: Sequence[tuple[str, str]]) -> str:
    """ "lr=0.0001,n_rollouts=4" from the overrides (a leaf name stands for its key unless two keys
    share it); characters outside [A-Za-z0-9._=,+-] become '-'; "base" for no overrides."""
    if not overrides:
        return "base"
    leaves = [key.rsplit(".", 1)[-1] for key, _ in overrides]
    parts = [
        f"{leaf if leaves.count(leaf) == 1 else key}={value}"
        for (key, value), leaf in zip(overrides, leaves, strict=True)
    ]
    name = re.sub(r"[^A-Za-z0-9._=,+-]", "-", ",".join(parts))
    if len(name) > NAME_LIMIT:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[: NAME_LIMIT - 9]}-{digest}"
    return name


def parse_set_flags(settings: Sequence[str]) -> dict[str, str]:
    """{"rl.total_steps": "1"} from ["rl.total_steps=1"]."""
    parsed = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            raise ValueError(f"--set={setting!r} is not key=value, e.g. --set=rl.total_steps=1")
        parsed[key.strip()] = value
    return parsed


def expand_sweep(
    config_path: str | os.PathLike,
    workdir: str | os.PathLike,
    common: Mapping[str, str] | None = None,
) -> list[SweepRun]:
    """The runs of the config file's `get_sweep()`, with `common` overrides added to each.

    Raises ValueError for a config without get_sweep, entries that are not dicts,
    unknown keys, a key set both by an entry and by `common`, and runs with the same name.
    """
    common = dict(common or {})
    module = cli.load_config_module(config_path)
    if not hasattr(module, "get_sweep"):
        raise ValueError(
            f"{config_path} has no get_sweep(); define one returning a list of override dicts, "
            'e.g. [{"rl.lr": 1e-4}, {"rl.lr": 3e-4}]'
        )
    config = module.get_config()
    entries = list(module.get_sweep())
    if not entries:
        raise ValueError(f"get_sweep() of {config_path} returned no runs")
    for key in common:
        check_key(config, key, "--set")
    runs, names = [], {}
    for index, entry in enumerate(entries):
        where = f"sweep entry {index} of {config_path}"
        if not isinstance(entry, Mapping):
            raise ValueError(f"{where} is {entry!r}; each entry must be a dict of overrides")
        for key in entry:
            check_key(config, key, where)
            if key in common:
                raise ValueError(f"{where} and --set both set {key!r}; set it in one place")
        overrides = tuple((key, format_value(value)) for key, value in entry.items())
        name = run_name(overrides)
        if name in names:
            raise ValueError(
                f"sweep entries {names[name]} and {index} of {config_path} both make run {name!r}; "
                "make their overrides differ"
            )
        names[name] = index
        runs.append(
            SweepRun(
                name=name,
                workdir=str(Path(workdir).resolve() / name),
                overrides=overrides + tuple(common.items()),
            )
        )
    return runs


def train_argv(config_path: str, run: SweepRun) -> list[str]:
    """`launch/train.py` arguments (after the interpreter) of one run."""
    return [
        "launch/train.py",
        f"--config={config_path}",
        f"--workdir={run.workdir}",
        *(f"--config.{key}={value}" for key, value in run.overrides),
    ]


def sbatch_line(
    config_path: str,
    run: SweepRun,
    sbatch_args: str = "",
    *,
    nodes: int = 1,
    gpus_per_node: int = 8,
) -> str:
    """`mkdir -p <workdir> && sbatch ...`: runs `run` from the repository root (SLURM does not
    create the directory of --output) as one task per node; each task's process drives all
    `gpus_per_node` GPUs of its node (JAX_LOCAL_DEVICE_IDS, read by
    parallel/distributed.py), 0 for CPU nodes."""
    environment = []
    if gpus_per_node > 0:
        ids = ",".join(str(i) for i in range(gpus_per_node))
        environment = ["export", f"{LOCAL_DEVICE_IDS_VARIABLE}={ids}", "&&"]
    job = " ".join(
        ["cd", shlex.quote(str(REPO_ROOT)), "&&", *environment, "srun", "python"]
        + [shlex.quote(arg) for arg in train_argv(config_path, run)]
    )
    return " ".join(
        [
            "mkdir",
            "-p",
            shlex.quote(run.workdir),
            "&&",
            "sbatch",
            f"--job-name={shlex.quote(run.name)}",
            f"--output={shlex.quote(run.workdir)}/slurm-%j.out",
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            *([f"--gpus-per-node={gpus_per_node}"] if gpus_per_node > 0 else []),
            *([sbatch_args] if sbatch_args else []),
            f"--wrap={shlex.quote(job)}",
        ]
    )


def check_job_devices(config: Any, nodes: int, gpus_per_node: int) -> None:
    """Raises ValueError when config.mesh names a device count (no -1) the job does not have."""
    sizes = (config.mesh.data, config.mesh.fsdp, config.mesh.tensor)
    if gpus_per_node <= 0 or -1 in sizes:
        return
    wanted, have = sizes[0] * sizes[1] * sizes[2], nodes * gpus_per_node
    if wanted != have:
        raise ValueError(
            f"config.mesh {sizes[0]}x{sizes[1]}x{sizes[2]} needs {wanted} GPUs but the job has "
            f"--nodes={nodes} x --gpus_per_node={gpus_per_node} = {have}; change one of them"
        )


def k8s_name(prefix: str, run: SweepRun) -> str:
    """A DNS-1123 label (lowercase, digits, '-', at most 63) unique to the run's name."""
    digest = hashlib.sha256(run.name.encode()).hexdigest()[:6]
    readable = re.sub(r"[^a-z0-9]+", "-", f"{prefix}-{run.name}".lower()).strip("-")
    return f"{readable[: K8S_NAME_LIMIT - 7].rstrip('-')}-{digest}"


def k8s_job(
    config_path: str,
    run: SweepRun,
    *,
    image: str,
    repo_dir: str,
    gpus: int,
    sweep: str,
    namespace: str | None = None,
) -> dict[str, Any]:
    """The Job manifest (launch/k8s/manifests.training_job, as a plain dict for YAML) that runs
    `run` once: no restarts or retries, as deepswe-trainer in `namespace` (None: the
    manifests' namespace)."""
    try:
        from launch.k8s.manifests import to_plain, training_job
    except ImportError as error:
        raise ImportError(
            f"--scheduler=k8s builds Jobs with the Kubernetes client ({error}); install it with "
            '`pip install -e ".[k8s]"`'
        ) from error
    label = re.sub(r"[^A-Za-z0-9_.-]+", "-", sweep)[:63].strip("-_.") or "sweep"
    job = training_job(
        k8s_name(label, run),
        image,
        ["python", *train_argv(config_path, run)],
        **({"namespace": namespace} if namespace else {}),
        gpus=gpus,
        working_dir=repo_dir,
        labels={"deepswe.sweep": label},
        annotations={"deepswe.run-name": run.name, "deepswe.workdir": run.workdir},
    )
    return to_plain(job)


def config_path_in_repo(config_path: str) -> str:
    """`config_path` relative to the repository root when inside it (as the Jobs' image sees it)."""
    path = Path(config_path).resolve()
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


def run_locally(config_path: str, runs: Sequence[SweepRun], workdir: Path) -> int:
    """Runs each `launch/train.py` in turn; writes <workdir>/sweep.json; returns failed runs.

    The runs share a JAX compilation cache (<workdir>/jax_cache unless JAX_COMPILATION_CACHE_DIR
    is set): programs that the overrides do not change compile once."""
    records, failed = [], 0
    env = {"JAX_COMPILATION_CACHE_DIR": str(workdir / "jax_cache"), **os.environ}
    for number, run in enumerate(runs, 1):
        Path(run.workdir).mkdir(parents=True, exist_ok=True)
        log_path = Path(run.workdir) / "train.log"
        command = [sys.executable, *train_argv(config_path, run)]
        print(f"[sweep] run {number}/{len(runs)} {run.name}: log in {log_path}", flush=True)
        started = time.monotonic()
        with open(log_path, "w") as log:
            returncode = subprocess.run(
                command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
            ).returncode
        seconds = time.monotonic() - started
        if returncode != 0:
            failed += 1
            tail = log_path.read_text(errors="replace")[-3000:]
            print(f"[sweep] {run.name} FAILED (exit {returncode}); end of its log:\n{tail}")
        else:
            print(f"[sweep] {run.name} finished in {seconds:.0f}s", flush=True)
        records.append(
            {
                "name": run.name,
                "workdir": run.workdir,
                "overrides": dict(run.overrides),
                "command": shlex.join(command),
                "returncode": returncode,
                "seconds": round(seconds, 1),
            }
        )
        (workdir / "sweep.json").write_text(json.dumps(records, indent=2) + "\n")
    return failed


def define_flags() -> None:
    """The command line (defined only when run as a script, so tests can import this module)."""
    flags.DEFINE_string("config", None, "Config file with get_config() and get_sweep().")
    flags.DEFINE_string("workdir", None, "Sweep directory; each run gets a subdirectory.")
    flags.DEFINE_enum("mode", "local", ["local", "print"], "Run here, or print commands.")
    flags.DEFINE_enum(
        "scheduler",
        "slurm",
        ["slurm", "k8s"],
        "What --mode=print writes: sbatch lines or Job YAML.",
    )
    flags.DEFINE_multi_string(
        "set", [], "key=value config override for every run, e.g. --set=rl.total_steps=1."
    )
    flags.DEFINE_integer("nodes", 1, "SLURM nodes per run (one task, one process, per node).")
    flags.DEFINE_integer(
        "gpus_per_node", 8, "GPUs per SLURM node, all driven by the node's process (0: CPU)."
    )
    flags.DEFINE_string(
        "sbatch_args", "", "Extra sbatch options, e.g. '--partition=gpu --time=72:00:00'."
    )
    flags.DEFINE_string(
        "k8s_image", "deepswe-jax:latest", "Container image (holding this repository) of the Jobs."
    )
    flags.DEFINE_string(
        "k8s_repo_dir", "/workspace", "Where the repository lies in the Jobs' image."
    )
    flags.DEFINE_integer("k8s_gpus", 0, "nvidia.com/gpu limit of each Job's pod.")
    flags.DEFINE_string(
        "k8s_namespace",
        None,
        "Namespace of the Jobs, where deepswe-trainer may run pods (default: launch/k8s's).",
    )
    flags.mark_flags_as_required(["config", "workdir"])


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}; overrides look like --set=x=y")
    options = flags.FLAGS
    workdir = Path(options.workdir).resolve()
    config_path = str(Path(options.config).resolve())
    try:
        runs = expand_sweep(config_path, workdir, parse_set_flags(options.set))
    except (ValueError, FileNotFoundError) as error:
        sys.exit(f"sweep.py: {error}")
    if options.mode == "print":
        if options.scheduler == "slurm":
            try:
                check_job_devices(
                    cli.load_config_module(config_path).get_config(),
                    options.nodes,
                    options.gpus_per_node,
                )
            except ValueError as error:
                sys.exit(f"sweep.py: {error}")
            for run in runs:
                print(
                    sbatch_line(
                        config_path,
                        run,
                        options.sbatch_args,
                        nodes=options.nodes,
                        gpus_per_node=options.gpus_per_node,
                    )
                )
            return
        import yaml

        in_repo = config_path_in_repo(config_path)
        jobs = [
            k8s_job(
                in_repo,
                run,
                image=options.k8s_image,
                repo_dir=options.k8s_repo_dir,
                gpus=options.k8s_gpus,
                sweep=workdir.name,
                namespace=options.k8s_namespace,
            )
            for run in runs
        ]
        print(yaml.safe_dump_all(jobs, sort_keys=False), end="")
        return
    workdir.mkdir(parents=True, exist_ok=True)
    failed = run_locally(config_path, runs, workdir)
    print(
        f"[sweep] {len(runs) - failed}/{len(runs)} runs finished; summary in {workdir}/sweep.json"
    )
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    define_flags()
    cli.run(main)
