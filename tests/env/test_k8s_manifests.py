"""Generated Kubernetes manifests validate against the Kubernetes schema and fit together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from deepswe_jax.env.k8s.k8s_pods import OWNER_POD_ENV, ROLE_LABEL, K8sPodSettings
from deepswe_jax.env.k8s.k8s_runtime import K8sRuntime
from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.tasks import load_tasks
from launch.k8s.manifests import (
    TRAINER_ACCOUNT,
    cluster_manifests,
    deny_all_network_policy,
    prepull_daemonsets,
    to_plain,
    to_yaml,
    trainer_rbac,
    training_job,
)

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tasks" / "tasks.jsonl"
# kubernetes-validate ships schemas per Kubernetes minor version; pin the one we check against.
K8S_VERSION = "1.32.0"


def validate(document: dict) -> None:
    """Raises kubernetes_validate.ValidationError for anything the API server would reject by
    schema, including unknown fields (strict)."""
    kubernetes_validate.validate(document, K8S_VERSION, strict=True)


@pytest.fixture(scope="module")
def shipped_images() -> list[str]:
    return [task.image for task in load_tasks(TASKS)]


def test_every_generated_manifest_validates(shipped_images, monkeypatch):
    files = cluster_manifests(
        shipped_images,
        train_command=["python", "launch/train.py", "--config=configs/tiny.py"],
        workdir_claim="deepswe-runs",
        images_per_daemonset=4,
        image_pull_secrets=["registry-credentials"],
    )
    for env, value in zip(OWNER_POD_ENV, ("trainer-0", "1234-abcd", "deepswe"), strict=True):
        monkeypatch.setenv(env, value)
    runtime = K8sRuntime("reg.io/deepswe/tinycalc:base", run_label="run-1", api=object())
    manifests = [m for ms in files.values() for m in ms] + [runtime.manifest()]
    kinds = [to_plain(m)["kind"] for m in manifests]
    assert kinds == [
        "Namespace",
        "NetworkPolicy",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "DaemonSet",
        "DaemonSet",
        "Job",
        "Pod",
        "Pod",
    ]
    for manifest in manifests:
        validate(to_plain(manifest))
    owner = to_plain(runtime.manifest())["metadata"]["ownerReferences"]
    assert owner == [{"apiVersion": "v1", "kind": "Pod", "name": "trainer-0", "uid": "1234-abcd"}]


def test_validation_rejects_a_broken_manifest():
    pod = to_plain(K8sRuntime("img", run_label="r", api=object()).manifest())
    pod["spec"]["restartPolicy"] = 3
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["containers"][0]["memoryLimit"] = "1g"  # not a field: strict rejects it
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(pod)


def test_network_policy_denies_all_traffic_of_every_env_pod():
    pod = to_plain(K8sRuntime("img", run_label="r", api=object()).manifest())
    policy = to_plain(deny_all_network_policy())
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector == {ROLE_LABEL: "env"}
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert RUN_LABEL in pod["metadata"]["labels"]
    # Both directions listed, no allow rules: nothing in, nothing out.
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert "ingress" not in policy["spec"] and "egress" not in policy["spec"]
    assert policy["metadata"]["namespace"] == pod["metadata"]["namespace"]


def test_env_pod_has_requests_equal_limits_and_never_restarts():
    settings = K8sPodSettings(mem_limit="3g")
    pod = to_plain(K8sRuntime("img", run_label="r", api=object(), settings=settings).manifest())
    container = pod["spec"]["containers"][0]
    assert pod["spec"]["restartPolicy"] == "Never"
    assert container["resources"]["requests"] == container["resources"]["limits"]
    assert container["resources"]["limits"]["memory"] == "3Gi"
    assert pod["spec"]["activeDeadlineSeconds"] > 5400 + 300  # an episode plus grading


def test_prepull_daemonsets_pull_each_image_once_on_every_node():
    images = [f"reg.io/deepswe/repo{i}:base" for i in range(7)] + ["reg.io/deepswe/repo0:base"]
    daemonsets = [to_plain(d) for d in prepull_daemonsets(images, images_per_daemonset=3)]
    assert len(daemonsets) == 3
    pulled = []
    for daemonset in daemonsets:
        validate(daemonset)
        template = daemonset["spec"]["template"]
        assert daemonset["spec"]["selector"]["matchLabels"].items() <= (
            template["metadata"]["labels"].items()
        )
        assert "nodeName" not in template["spec"] and "affinity" not in template["spec"]
        for container in template["spec"]["initContainers"]:
            assert container["command"] == ["true"]
            pulled.append(container["image"])
    assert pulled == list(dict.fromkeys(images))
    names = [d["metadata"]["name"] for d in daemonsets]
    assert len(set(names)) == len(names)
    with pytest.raises(ValueError, match="no images"):
        prepull_daemonsets([])


def test_training_job_may_run_env_pods_and_owns_them():
    job = to_plain(training_job("train-1", "reg.io/deepswe-jax:v1", ["python", "x.py"], gpus=8))
    validate(job)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0
    assert pod_spec["serviceAccountName"] == TRAINER_ACCOUNT
    env = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in pod_spec["containers"][0]["env"]
    }
    assert env == dict(
        zip(OWNER_POD_ENV, ("metadata.name", "metadata.uid", "metadata.namespace"), strict=True)
    )
    account, role, binding = (to_plain(m) for m in trainer_rbac())
    assert binding["subjects"][0]["name"] == account["metadata"]["name"] == TRAINER_ACCOUNT
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    grants = {(r["resources"][0], verb) for r in role["rules"] for verb in r["verbs"]}
    needed = {("pods", v) for v in ("create", "get", "list", "watch", "delete")}
    assert needed | {("pods/exec", "create"), ("events", "list")} <= grants


def test_command_line_writes_valid_yaml_for_a_task_file(tmp_path, shipped_images):
    out = tmp_path / "k8s"
    subprocess.run(
        [
            sys.executable,
            "launch/k8s_manifests.py",
            f"--tasks={TASKS}",
            f"--out_dir={out}",
            "--image_prefix=reg.io/",
            "--namespace=swe",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml"))
    assert written == [
        "00-namespace.yaml",
        "10-env-network-policy.yaml",
        "20-trainer-rbac.yaml",
        "30-prepull-daemonsets.yaml",
        "40-train-job.yaml",
        "reference/env-pod.yaml",
    ]
    documents = [d for p in sorted(out.rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    for document in documents:
        validate(document)
        assert document["kind"] == "Namespace" or document["metadata"]["namespace"] == "swe"
    pulled = {
        c["image"]
        for d in documents
        if d["kind"] == "DaemonSet"
        for c in d["spec"]["template"]["spec"]["initContainers"]
    }
    assert pulled == {"reg.io/" + image for image in shipped_images}
    (job,) = [d for d in documents if d["kind"] == "Job"]
    (trainer,) = job["spec"]["template"]["spec"]["containers"]
    command = trainer.get("command", []) + trainer.get("args", [])
    assert command[:2] == ["python", "launch/train.py"]
    # Episodes, grading and execution checks of the Job run in pods of this namespace and prefix.
    assert {
        "--config.env.backend=kubernetes",
        "--config.env.kubernetes.namespace=swe",
        "--config.env.kubernetes.image_prefix=reg.io/",
    } <= set(command)


def test_yaml_round_trips_scripts_exactly():
    pod = K8sRuntime("img", run_label="r", api=object()).manifest()
    assert yaml.safe_load(to_yaml([pod])) == to_plain(pod)
