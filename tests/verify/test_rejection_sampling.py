"""Rejection sampling for SFT: resolved only, at most 2 per task, fewest steps first, no duplicates."""

import pytest

from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.verify.rejection_sampling import select_for_sft


def trajectory(
    task_id: str,
    index: int,
    *,
    resolved: bool = True,
    steps: int = 3,
    response_tokens: int = 4,
    stop: StopReason = StopReason.finished,
    infra_error: bool = False,
    tokens_seed: int | None = None,
) -> Trajectory:
    """A graded trajectory whose token ids are unique per (task_id, index) unless tokens_seed is
    given; reward as a rollout gives it (resolved and finished)."""
    prompt = (1, 2, 3)
    seed = index if tokens_seed is None else tokens_seed
    tokens = prompt + tuple(100 + seed for _ in range(response_tokens))
    if infra_error:
        grade = GradeResult(task_id, "infra_error", 0.0, False, False, error="grader died")
    else:
        status = "resolved" if resolved else "unresolved"
        grade = GradeResult(task_id, status, float(resolved), True, resolved)
    return Trajectory(
        task_id=task_id,
        rollout_index=index,
        policy_version=0,
        prompt_ids=prompt,
        token_ids=tokens,
        loss_mask=(0,) * len(prompt) + (1,) * response_tokens,
        sampler_logprobs=(0.0,) * len(prompt) + (-0.1,) * response_tokens,
        reward=float(grade.resolved and stop is StopReason.finished),
        stop_reason=stop,
        infra_error=infra_error,
        num_steps=steps,
        patch="diff",
        timings={},
        steps=(),
        grade=grade,
    )


def keys(selection):
    return [(t.task_id, t.rollout_index) for t in selection.trajectories]


def test_only_resolved_finished_trajectories_without_infra_errors():
    candidates = [
        trajectory("a", 0),
        trajectory("a", 1, resolved=False),
        trajectory("b", 0, stop=StopReason.max_steps),  # a resolving patch, never submitted
        trajectory("c", 0, infra_error=True),
        trajectory("d", 0, resolved=False, stop=StopReason.timeout),
    ]
    assert [t.resolved for t in candidates] == [True, False, True, False, False]
    selection = select_for_sft(candidates)
    assert keys(selection) == [("a", 0)]
    assert (selection.num_candidates, selection.num_resolved, selection.num_tasks) == (5, 1, 1)


def test_at_most_two_per_task_preferring_fewer_steps_then_fewer_tokens():
    candidates = [
        trajectory("a", 0, steps=9),
        trajectory("a", 1, steps=4, response_tokens=9),
        trajectory("a", 2, steps=7),
        trajectory("a", 3, steps=4, response_tokens=5),
        trajectory("b", 0, steps=12),
        trajectory("b", 1, steps=12),  # a tie keeps the input order
        trajectory("b", 2, steps=12),
        trajectory("c", 0, steps=1, resolved=False),
    ]
    selection = select_for_sft(candidates)
    assert keys(selection) == [("a", 3), ("a", 1), ("b", 0), ("b", 1)]
    assert selection.num_over_cap == 3 and selection.num_tasks == 2
    assert keys(select_for_sft(candidates, max_per_task=1)) == [("a", 3), ("b", 0)]
    assert len(select_for_sft(candidates, max_per_task=10).trajectories) == 7


def test_identical_token_sequences_fill_the_cap_once():
    candidates = [
        trajectory("a", 0, tokens_seed=7),
        trajectory("a", 1, tokens_seed=7),  # e.g. the deterministic expert collected twice
        trajectory("a", 2, tokens_seed=8, steps=5),
    ]
    selection = select_for_sft(candidates)
    assert keys(selection) == [("a", 0), ("a", 2)]
    assert selection.num_duplicates == 1 and selection.num_over_cap == 0


def test_cap_below_one_is_rejected():
    with pytest.raises(ValueError, match="at least 1"):
        select_for_sft([trajectory("a", 0)], max_per_task=0)
