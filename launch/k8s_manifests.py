"""Write the Kubernetes manifests for running a task file's environments on a cluster.

  python launch/k8s_manifests.py --tasks=tasks/tasks.jsonl --out_dir=/tmp/k8s \
      --image_prefix=registry.example.com/ --train_image=registry.example.com/deepswe-jax:v1
  kubectl apply -f /tmp/k8s

Writes namespace, deny-all NetworkPolicy for env pods, trainer ServiceAccount/Role/
RoleBinding, image pre-pull DaemonSets and the training Job (see launch/k8s/manifests.py),
plus reference/env-pod.yaml, the pod K8sRuntime creates (not applied by the command above).
Task images must first be pushed where the nodes can pull them: build them with
launch/build_images.py, then `docker tag deepswe/x:base <prefix>deepswe/x:base` and push.
The Job trains with `--config.env.backend=kubernetes` and this namespace and image prefix, so
its episodes, grading and execution checks run in pods (launch/k8s/README.md).
`--images=FILE` (one image per line, e.g. the images.txt of launch/prepare_data.py) pre-pulls
those images instead of the task file's.
"""

import os
import sys
from pathlib import Path

# Run as a script (python launch/k8s_manifests.py), the repository root is not on sys.path.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from deepswe_jax import interrupts  # noqa: E402

interrupts.install()  # before the heavy imports: Ctrl-C while they load ends in one line

from absl import app, flags  # noqa: E402

from deepswe_jax import cli  # noqa: E402
from deepswe_jax.env.k8s.k8s_pods import DEFAULT_NAMESPACE  # noqa: E402
from deepswe_jax.env.tasks import load_tasks  # noqa: E402
from launch.k8s.manifests import cluster_manifests, to_yaml  # noqa: E402

_TASKS = flags.DEFINE_string("tasks", "tasks/tasks.jsonl", "Task file whose images to pre-pull.")
_IMAGES = flags.DEFINE_string(
    "images",
    None,
    "File of images to pre-pull, one per line (launch/prepare_data.py writes "
    "one); used instead of --tasks.",
)
_OUT_DIR = flags.DEFINE_string("out_dir", None, "Folder for the YAML files.")
_NAMESPACE = flags.DEFINE_string("namespace", DEFAULT_NAMESPACE, "Namespace of env pods and Job.")
_IMAGE_PREFIX = flags.DEFINE_string(
    "image_prefix", "", "Put before each task image (registry it was pushed to), e.g. reg.io/."
)
_PER_DAEMONSET = flags.DEFINE_integer(
    "images_per_daemonset", 50, "Images pre-pulled by one DaemonSet."
)
_PULL_SECRETS = flags.DEFINE_list(
    "image_pull_secrets", [], "Secrets for pulling private task images."
)
_TRAIN_IMAGE = flags.DEFINE_string(
    "train_image", "deepswe-jax:latest", "Image (holding this repository) of the training Job."
)
_TRAIN_CONFIG = flags.DEFINE_string(
    "train_config", "configs/deepswe_qwen3_32b.py", "Config file the Job trains with."
)
_GPUS = flags.DEFINE_integer("gpus", 8, "nvidia.com/gpu limit of the training pod.")
_WORKDIR_CLAIM = flags.DEFINE_string(
    "workdir_claim", None, "PersistentVolumeClaim mounted at /runs for the run directory."
)


def main(argv: list[str]) -> None:
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments {argv[1:]}")
    if _IMAGES.value:
        lines = Path(_IMAGES.value).read_text().splitlines()
        names = [line.strip() for line in lines if line.strip()]
    else:
        names = [task.image for task in load_tasks(_TASKS.value)]
    images = [_IMAGE_PREFIX.value + name for name in names]
    command = [
        "python",
        "launch/train.py",
        f"--config={_TRAIN_CONFIG.value}",
        "--workdir=/runs/deepswe-train",
        "--config.env.backend=kubernetes",
        f"--config.env.kubernetes.namespace={_NAMESPACE.value}",
        f"--config.env.kubernetes.image_prefix={_IMAGE_PREFIX.value}",
    ]
    files = cluster_manifests(
        images,
        namespace_name=_NAMESPACE.value,
        train_image=_TRAIN_IMAGE.value,
        train_command=command,
        gpus=_GPUS.value,
        workdir_claim=_WORKDIR_CLAIM.value,
        images_per_daemonset=_PER_DAEMONSET.value,
        image_pull_secrets=_PULL_SECRETS.value,
    )
    out_dir = Path(_OUT_DIR.value)
    for name, manifests in files.items():
        path = out_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(to_yaml(manifests))
    print(f"wrote {len(files)} files to {out_dir} ({len(set(images))} images to pre-pull)")


if __name__ == "__main__":
    flags.mark_flags_as_required(["out_dir"])
    cli.run(main)
