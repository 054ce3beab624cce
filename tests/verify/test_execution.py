"""Execution-based verification on a shipped task, in real containers: regression and
reproduction scores of the gold patch, a patch that breaks existing tests, and no patch; the
same runs on the runtimes of a runtime factory, also from evaluation's execution scorer."""

import textwrap
import uuid
from pathlib import Path

import docker
import pytest

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.docker.images import ensure_task_image
from deepswe_jax.env.tasks import load_tasks, unified_diff
from deepswe_jax.experiment.evaluation import make_scorer
from deepswe_jax.verify.execution import (
    ExecutionScore,
    ReproductionTest,
    regression_tests,
    score_candidates,
)
from deepswe_jax.verify.select import CandidateScores
from tests.env.test_grading import LabelledDockerFactory

REPRODUCTION = ReproductionTest(
    "tests/test_reproduce_issue.py",
    textwrap.dedent(
        """\
        from lrukit import LRUCache


        def test_put_refreshes_recency():
            cache = LRUCache(maxsize=2)
            cache.put("a", 1)
            cache.put("b", 2)
            cache.put("a", 10)
            cache.put("c", 3)
            assert cache.keys() == ["a", "c"]


        def test_get_after_put():
            cache = LRUCache(maxsize=2)
            cache.put("a", 1)
            assert cache.get("a") == 1
        """
    ),
)


@pytest.fixture(scope="module")
def docker_client():
    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:
        pytest.fail(f"no Docker engine answers ({e}); start dockerd or set DOCKER_HOST")
    return client


@pytest.fixture(scope="module")
def run_label(docker_client):
    label = f"pytest-execution-{uuid.uuid4().hex[:8]}"
    yield label
    for container in docker_client.containers.list(
        all=True, filters={"label": f"deepswe.run={label}"}
    ):
        container.remove(force=True)


@pytest.fixture(scope="module")
def task(docker_client):
    [task] = [t for t in load_tasks("tasks/tasks.jsonl") if t.instance_id == "lrukit-1"]
    ensure_task_image(task, docker_client)
    return task


def breaking_patch(task) -> str:
    """`len(cache)` off by one: breaks some existing tests, not all."""
    path = "lrukit/cache.py"
    before = (Path(task.source) / path).read_text()
    after = before.replace("return len(self._nodes)", "return len(self._nodes) + 1")
    assert after != before
    return unified_diff(path, before, after)


def test_gold_keeps_every_existing_test_and_a_breaking_patch_does_not(
    task, docker_client, run_label
):
    regression = regression_tests(task, client=docker_client, run_label=run_label)
    assert set(regression) == set(task.PASS_TO_PASS)  # all pass at the base commit
    gold, broken, empty = score_candidates(
        task,
        [task.patch, breaking_patch(task), ""],
        regression=regression,
        reproduction=REPRODUCTION,
        client=docker_client,
        run_label=run_label,
    )
    assert gold.regression_score == 1.0 and gold.regression_total == len(regression)
    assert 0.0 < broken.regression_score < 1.0, broken
    assert empty.regression_score == 1.0
    # The reproduction file: both of its tests pass with the fix, one without.
    assert (gold.reproduction_passed, gold.reproduction_total) == (2, 2)
    assert (empty.reproduction_passed, empty.reproduction_total) == (1, 2)
    assert gold.candidate_scores(verifier=0.7) == CandidateScores(0.7, 1.0, 1.0)
    assert empty.candidate_scores().reproduction == 0.5


def test_unappliable_patch_scores_nothing_and_infra_errors_are_not_measured(
    task, docker_client, run_label
):
    [garbled] = score_candidates(
        task,
        ["--- a/nope.py\n+++ b/nope.py\n@@ -1 +1 @@\n-x\n+y\n"],
        regression=task.PASS_TO_PASS,
        client=docker_client,
        run_label=run_label,
    )
    assert garbled.status == "apply_failed" and garbled.regression_score == 0.0
    assert garbled.reproduction_score is None
    lost = ExecutionScore("x", "infra_error", 0, 10, error="container died")
    assert lost.regression_score is None and lost.candidate_scores() == CandidateScores()


def test_candidates_are_scored_in_the_runtimes_of_a_runtime_factory(task, docker_client, run_label):
    factory = LabelledDockerFactory(docker_client)
    try:
        [broken] = score_candidates(
            task, [breaking_patch(task)], runtime_factory=factory, run_label=run_label
        )
    finally:
        factory.remove_stale((run_label,))
    assert broken.regression_total == len(task.PASS_TO_PASS)
    assert 0.0 < broken.regression_score < 1.0, broken
    # The regression baseline at the base commit, then the candidate.
    assert factory.calls == [(task.image, run_label)] * 2


def candidate(task, patch: str) -> Trajectory:
    return Trajectory(
        task_id=task.instance_id,
        rollout_index=0,
        policy_version=0,
        prompt_ids=(),
        token_ids=(),
        loss_mask=(),
        sampler_logprobs=(),
        reward=0.0,
        stop_reason=StopReason.finished,
        infra_error=False,
        num_steps=1,
        patch=patch,
        timings={},
        steps=(),
        grade=None,
    )


def test_the_evaluation_scorer_runs_execution_checks_on_the_pools_runtime_factory(
    task, docker_client, run_label
):
    factory = LabelledDockerFactory(docker_client)
    scorer = make_scorer(
        ("execution",),
        verifier_dir=None,
        timeout=120,
        workers=1,
        run_label=run_label,
        runtime_factory=factory,
    )
    try:
        [scores] = scorer(task, [candidate(task, breaking_patch(task))])
    finally:
        factory.remove_stale((run_label,))
    assert 0.0 < scores.regression < 1.0 and scores.reproduction is None
    # The regression baseline, then the candidate: both in the factory's runtimes.
    assert factory.calls == [(task.image, run_label)] * 2
    assert len(factory.made) == 2


def test_reproduction_test_must_be_a_test_path():
    with pytest.raises(ValueError, match="not a test path"):
        ReproductionTest("reproduce.py", "def test_x(): pass\n")
