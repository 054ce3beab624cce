"""K8sRuntime running real commands: `FakeCoreV1Api` (tests/env/k8s_fakes.py) runs each pod
as a Docker container from the pod's own manifest and each exec in it, so the wrapper, the tar
transfers, the timeouts and the diff run for real; the env pool runs episodes and gradings in
such pods, also when a config with env.backend='kubernetes' builds it (experiment.
make_env_pool). `test_real_cluster_end_to_end` runs against a cluster whenever KUBECONFIG
points to one.
"""

from __future__ import annotations

import asyncio
import io
import os
import threading
import uuid

import pytest
from kubernetes import client as k8s

from configs import tiny
from deepswe_jax import experiment
from deepswe_jax.env.docker.placement import FactoryPlacement
from deepswe_jax.env.k8s.k8s_pods import K8sPodSettings, remove_stale_pods
from deepswe_jax.env.k8s.k8s_runtime import K8sPodFactory, K8sRuntime
from deepswe_jax.env.ownership import RUN_LABEL
from deepswe_jax.env.pool import EnvPool
from tests.env.k8s_fakes import (
    NAMESPACE,
    TIMEOUT,
    FakeCoreV1Api,
)

# ---------------------------------------------------------------- real commands in a container


@pytest.fixture(scope="module")
def container_api(docker_client):
    return FakeCoreV1Api(docker=docker_client)


@pytest.fixture(scope="module")
def pod(container_api, tiny_task, run_label):
    runtime = K8sRuntime(tiny_task.image, run_label=run_label, api=container_api)
    runtime.start()
    yield runtime
    runtime.close()


def processes(runtime):
    return runtime.run("ps -eo pid=,args=", timeout=TIMEOUT).output


def test_run_merges_output_and_reports_exit_code(pod):
    result = pod.run("echo out; echo err >&2; pwd; exit 3", timeout=TIMEOUT)
    assert (result.exit_code, result.timed_out) == (3, False)
    assert result.output.splitlines() == ["out", "err", "/testbed"]


def test_timeout_kills_the_command_and_its_children(pod):
    result = pod.run("sleep 1001 & sleep 1002", timeout=1)
    assert result.timed_out and result.exit_code is None
    assert "sleep 100" not in processes(pod)


def test_processes_left_in_the_background_are_killed_when_the_command_ends(pod):
    result = pod.run("(sleep 1003; echo late) & echo early", timeout=TIMEOUT)
    assert (result.exit_code, result.output) == (0, "early\n")
    assert "sleep 1003" not in processes(pod)


def test_output_keeps_head_and_tail_within_the_limit(pod):
    result = pod.run("seq 1 200000", timeout=TIMEOUT, max_output=2000)
    assert result.output.startswith("1\n2\n3\n") and result.output.endswith("199999\n200000\n")
    assert "bytes of output omitted" in result.output and len(result.output) < 2100


def test_write_and_read_files_byte_exact(pod):
    data = bytes(range(256)) * 4000  # 1 MB, every byte value
    pod.write_file("/tmp/deep/new/dir/blob.bin", data)
    assert pod.read_file("/tmp/deep/new/dir/blob.bin") == data
    pod.write_file("/tmp/text.txt", "héllo\udcff")
    assert pod.read_file("/tmp/text.txt") == "héllo\udcff".encode("utf-8", "surrogateescape")
    with pytest.raises(FileNotFoundError):
        pod.read_file("/tmp/no-such-file")
    with pytest.raises(IsADirectoryError):
        pod.read_file("/tmp/deep")


def test_tools_run_from_the_pod(pod):
    created = pod.call_tool(
        "file_editor",
        {"command": "create", "path": "/tmp/tool_made.py", "file_text": "x = 1\n"},
        timeout=TIMEOUT,
    )
    assert created.exit_code == 0, created.output
    assert pod.read_file("/tmp/tool_made.py") == b"x = 1\n"
    bash = pod.call_tool("execute_bash", {"cmd": "echo via-tool"}, timeout=TIMEOUT)
    assert "via-tool" in bash.output
    slow = pod.call_tool("execute_bash", {"cmd": "sleep 1004"}, timeout=1)
    assert slow.timed_out and "sleep 1004" not in processes(pod)


def test_init_survives_the_agent_killing_everything_and_reaps_orphans(pod):
    pod.run("kill -9 -1; pkill python3; kill -INT 1; kill -TERM 1", timeout=TIMEOUT)
    for _ in range(3):
        pod.run("(sleep 0.1 &) ; true", timeout=TIMEOUT)
    threading.Event().wait(1.5)  # the reaper polls once a second when it has no children
    listing = processes(pod)
    assert "import os, signal, time" in listing.splitlines()[0]
    assert "defunct" not in listing


@pytest.fixture(scope="module")
def image_without_python3_on_path(docker_client, tiny_task):
    """tiny_task's image with its interpreter only at /opt/miniconda3/bin/python3, off PATH (as
    images whose Python lives in an environment): `env python3` and `python3` find nothing."""
    tag = f"deepswe-test/no-python3-on-path:{uuid.uuid4().hex[:8]}"
    dockerfile = (
        f"FROM {tiny_task.image}\n"
        'RUN real="$(readlink -f "$(command -v python3)")" && mkdir -p /opt/miniconda3/bin'
        ' && ln -s "$real" /opt/miniconda3/bin/python3'
        " && rm -f /usr/bin/python3 /usr/local/bin/python3 && ! command -v python3\n"
    )
    docker_client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    yield tag
    docker_client.images.remove(tag, force=True)


def test_pods_find_python_off_path_for_init_and_tools(
    container_api, image_without_python3_on_path, run_label
):
    """Before: the pod's command was `python3 -c POD_INIT` and tools ran by their
    `#!/usr/bin/env python3` line, so such an image failed where Docker containers work."""
    runtime = K8sRuntime(image_without_python3_on_path, run_label=run_label, api=container_api)
    runtime.start()
    try:
        assert runtime.run("command -v python3 || echo none", timeout=TIMEOUT).output == "none\n"
        init = processes(runtime).splitlines()[0]
        assert "/opt/miniconda3/bin/python3 -c import os, signal, time" in init, init
        created = runtime.call_tool(
            "file_editor",
            {"command": "create", "path": "/tmp/off_path.py", "file_text": "y = 2\n"},
            timeout=TIMEOUT,
        )
        assert created.exit_code == 0, created.output
        assert runtime.read_file("/tmp/off_path.py") == b"y = 2\n"
        found = runtime.call_tool(
            "search", {"search_term": "y = 2", "path": "/tmp"}, timeout=TIMEOUT
        )
        assert "off_path.py" in found.output, found.output
    finally:
        runtime.close()


def test_diff_holds_edits_and_new_files(pod, tiny_task):
    pod.write_file("/testbed/tinycalc/__init__.py", "def add(a, b):\n    return a + b\n")
    pod.write_file("/testbed/NEW.txt", "new file\n")
    patch = pod.diff(tiny_task.base_commit)
    assert "+    return a + b" in patch and "b/NEW.txt" in patch
    assert pod.run("git status --porcelain", timeout=TIMEOUT).output.count("??") == 1


def test_env_pool_runs_episodes_on_the_kubernetes_runtime(container_api, tiny_task, run_label):
    factory = K8sPodFactory(api=container_api, settings=K8sPodSettings(NAMESPACE))

    async def episode():
        async with EnvPool(
            max_envs=1, runtime_factory=factory, build_images=False, run_label=run_label
        ) as pool:
            async with pool.acquire(tiny_task) as env:
                step = await env.step("execute_bash", {"cmd": "echo from-pool"})
                env.runtime.write_file("/testbed/tinycalc/extra.py", "y = 2\n")
                patch = await env.patch()
                name = env.runtime.name
            return step, patch, name, pool.stats

    step, patch, name, stats = asyncio.run(episode())
    assert "from-pool" in step.observation and not step.done and step.exit_code == 0
    assert "b/tinycalc/extra.py" in patch
    assert name not in container_api.pods and stats.released == 1
    listings = [c for c in container_api.called("list_namespaced_pod") if not c["watch"]]
    assert [c["label_selector"] for c in listings] == [RUN_LABEL]  # the pool's stale cleanup


def test_env_pool_grades_in_pods_of_its_kubernetes_factory(container_api, tiny_task, run_label):
    factory = K8sPodFactory(api=container_api, settings=K8sPodSettings(NAMESPACE))
    wrong = tiny_task.patch.replace("+    return a + b", "+    return a * b")  # applies, no fix
    first_pod = len(container_api.called("create_namespaced_pod"))

    async def grade():
        async with EnvPool(
            max_envs=1, runtime_factory=factory, build_images=False, run_label=run_label
        ) as pool:
            return await pool.grade(tiny_task, tiny_task.patch), await pool.grade(tiny_task, wrong)

    gold, unfixed = asyncio.run(grade())
    assert gold.status == "resolved", gold.test_log
    assert unfixed.status == "unresolved" and unfixed.patch_successfully_applied, unfixed.test_log
    assert unfixed.tests_status["FAIL_TO_PASS"]["failure"] == list(tiny_task.FAIL_TO_PASS)
    pods = [call["body"] for call in container_api.called("create_namespaced_pod")[first_pod:]]
    assert [(pod.spec.containers[0].image, pod.metadata.labels[RUN_LABEL]) for pod in pods] == [
        (tiny_task.image, run_label)
    ] * 2
    names = {pod.metadata.name for pod in pods}
    assert names.isdisjoint(container_api.pods)  # each grading pod was deleted afterwards
    test_runs = [
        call["name"]
        for call in container_api.called("connect_get_namespaced_pod_exec")
        if "-rA" in " ".join(call["command"])
    ]
    assert sorted(test_runs) == sorted(names)  # the tests ran in the pods, once each


# ---------------------------------------------------------------- from a config


def kubernetes_config(**settings):
    """configs/tiny.py with env.backend='kubernetes' and `settings` in env.kubernetes."""
    config = tiny.get_config()
    config.env.backend = "kubernetes"
    config.env.kubernetes.update(settings)
    return config


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- {name: local, cluster: {server: "https://local.example:6443"}}
- {name: gpu, cluster: {server: "https://gpu-cluster.example:6443"}}
users:
- {name: trainer, user: {token: not-a-secret}}
contexts:
- {name: local, context: {cluster: local, user: trainer}}
- {name: gpu, context: {cluster: gpu, user: trainer}}
current-context: local
"""


def test_a_configs_kubeconfig_and_context_choose_the_cluster(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    config = kubernetes_config(kubeconfig=str(kubeconfig), context="gpu", namespace="swe")
    factory = experiment.kubernetes_pod_factory(config)
    assert factory.api.api_client.configuration.host == "https://gpu-cluster.example:6443"
    assert factory.settings == K8sPodSettings(namespace="swe", mem_limit="1g", cpus=1.0)
    config.env.kubernetes.context = ""  # the file's current context
    host = experiment.kubernetes_pod_factory(config).api.api_client.configuration.host
    assert host == "https://local.example:6443"
    config.env.kubernetes.kubeconfig = str(tmp_path / "missing")
    with pytest.raises(RuntimeError, match="config.env.kubernetes.kubeconfig"):
        experiment.make_env_pool(config, "pytest-k8s")


def test_a_config_with_backend_kubernetes_runs_episodes_and_grading_in_pods(
    container_api, docker_client, tiny_task, run_label, monkeypatch
):
    """make_env_pool on a config naming a cluster (kubeconfig, context), a registry prefix, a
    node selector and limits: the pool's pods carry them, and episodes and grading run there."""
    config = kubernetes_config(
        kubeconfig="/etc/deepswe/kubeconfig",
        context="gpu",
        namespace=NAMESPACE,
        image_prefix="registry.example/",
        node_selector=("pool=envs",),
        active_deadline_s=3600,
    )
    config.env.update(mem_limit="2g", cpus=0.5)
    clusters = []

    def fake_cluster(kubeconfig: str, context: str):
        clusters.append((kubeconfig, context))
        return container_api

    monkeypatch.setattr(experiment.env, "kubernetes_api", fake_cluster)
    pulled = "registry.example/" + tiny_task.image  # what the nodes would pull
    docker_client.images.get(tiny_task.image).tag(pulled)
    first_pod = len(container_api.called("create_namespaced_pod"))
    first_exec = len(container_api.called("connect_get_namespaced_pod_exec"))
    pool = experiment.make_env_pool(config, run_label, grade_concurrency=1)

    async def episode_and_grade():
        async with pool:
            async with pool.acquire(tiny_task) as env:
                step = await env.step("execute_bash", {"cmd": "echo from-config"})
                await env.step(
                    "file_editor",
                    {
                        "command": "str_replace",
                        "path": "/testbed/tinycalc/__init__.py",
                        "old_str": "return a - b",
                        "new_str": "return a + b",
                    },
                )
                patch = await env.patch()
            return step, await pool.grade(tiny_task, patch)

    try:
        step, grade = asyncio.run(episode_and_grade())
    finally:
        docker_client.images.remove(pulled)
    assert clusters == [("/etc/deepswe/kubeconfig", "gpu")]
    # no Docker engine, no image builds
    assert isinstance(pool.placement, FactoryPlacement) and not pool.build_images
    assert "from-config" in step.observation and step.exit_code == 0
    assert grade.status == "resolved", grade.test_log
    pods = [call["body"] for call in container_api.called("create_namespaced_pod")[first_pod:]]
    assert len(pods) == 2  # the episode's pod, then a fresh one for grading
    for pod in pods:
        container = pod.spec.containers[0]
        assert (pod.metadata.namespace, container.image) == (NAMESPACE, pulled)
        assert pod.spec.node_selector == {"pool": "envs"}
        assert pod.spec.active_deadline_seconds == 3600
        assert container.resources.limits["memory"] == "2Gi"
        assert container.resources.limits["cpu"] == "500m"
    names = {pod.metadata.name for pod in pods}
    assert names.isdisjoint(container_api.pods)  # both deleted
    test_runs = [
        call["name"]
        for call in container_api.called("connect_get_namespaced_pod_exec")[first_exec:]
        if "-rA" in " ".join(call["command"])
    ]
    assert test_runs == [pods[1].metadata.name]  # the grading pod ran the tests


# ---------------------------------------------------------------- a real cluster


@pytest.mark.skipif(
    not os.environ.get("KUBECONFIG"),
    reason="KUBECONFIG is not set: no Kubernetes cluster to run against",
)
def test_real_cluster_end_to_end():
    """Against the cluster in KUBECONFIG, namespace $DEEPSWE_K8S_NAMESPACE (default deepswe),
    image $DEEPSWE_K8S_TEST_IMAGE (default deepswe/base:dev; needs python3, git, coreutils;
    with kind: `kind load docker-image deepswe/base:dev`)."""
    from kubernetes import config

    config.load_kube_config()
    api = k8s.CoreV1Api()
    namespace = os.environ.get("DEEPSWE_K8S_NAMESPACE", "deepswe")
    image = os.environ.get("DEEPSWE_K8S_TEST_IMAGE", "deepswe/base:dev")
    label = f"pytest-{uuid.uuid4().hex[:10]}"
    settings = K8sPodSettings(namespace=namespace, image_pull_policy="IfNotPresent")
    runtime = K8sRuntime(image, run_label=label, api=api, settings=settings)
    try:
        runtime.start()
        assert runtime.run("echo hi; exit 4", timeout=TIMEOUT, workdir="/").exit_code == 4
        slow = runtime.run("sleep 1001 & sleep 1002", timeout=2, workdir="/")
        assert (
            slow.timed_out
            and "sleep 100" not in runtime.run("ps -eo args=", timeout=TIMEOUT, workdir="/").output
        )
        data = bytes(range(256)) * 100
        runtime.write_file("/tmp/x/blob.bin", data)
        assert runtime.read_file("/tmp/x/blob.bin") == data
        setup = runtime.run(
            "mkdir -p /tmp/repo && cd /tmp/repo && git init -q && echo a > f && git add f && "
            "git -c user.name=t -c user.email=t@t commit -qm base && git rev-parse HEAD",
            timeout=TIMEOUT,
            workdir="/",
        )
        base = setup.output.split()[-1]
        runtime.write_file("/tmp/repo/f", "b\n")
        assert "+b" in runtime.diff(base, repo="/tmp/repo")
        tool = runtime.call_tool("execute_bash", {"cmd": "echo tool"}, timeout=TIMEOUT)
        assert "tool" in tool.output
        offline = runtime.run(
            "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"",
            timeout=TIMEOUT,
            workdir="/",
        )
        assert offline.exit_code != 0, "env pods must have no network (apply the NetworkPolicy)"
    finally:
        runtime.close()
    assert remove_stale_pods(api, namespace, run_labels=(label,)) in ([], [runtime.name])
