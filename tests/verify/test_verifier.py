"""Execution-free verifier: rendering and condensing, the score, data selection, and training
that learns a label recoverable from the rendered text (held-out AUC)."""

import json

import jax
import numpy as np
import pytest
from flax import nnx

from configs import verifier_tiny
from deepswe_jax.agent.chat import ChatTokenizer
from deepswe_jax.agent.trajectory import StopReason, Trajectory
from deepswe_jax.env.grading.grading import GradeResult
from deepswe_jax.experiment import initial_params, sharding_rules, train_verifier
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import make_mesh, shard_model
from deepswe_jax.verify.verifier import (
    ANSWER_PREFIX,
    RenderedStep,
    VerifierExample,
    VerifierPrompt,
    VerifierScorer,
    load_verifier,
    roc_auc,
    select_verifier_trajectories,
    trajectory_steps,
    verifier_micro_batch,
)
from deepswe_jax.verify.verifier_training import split_by_task

TOKENIZER_DIR = "tests/assets/tokenizer"
WORDS = "parse value token lexer reader config cache interval table width date week".split()


@pytest.fixture(scope="module")
def tokenizer() -> ChatTokenizer:
    return ChatTokenizer.from_directory(TOKENIZER_DIR)


def make_trajectory(task_id, index, *, resolved, rng=None, grade=True, infra_error=False):
    """A finished 3-step episode; its last test run prints a marker that tells the label."""
    rng = rng or np.random.default_rng(index)
    filler = " ".join(rng.choice(WORDS, int(rng.integers(2, 12))))
    marker = "ALL TESTS PASSED" if resolved else "1 FAILED TEST"
    steps = (
        {
            "step": 0,
            "assistant": "<think>Where is the code?</think>\nLet me look.\n"
            "<function=execute_bash><parameter=command>ls</parameter></function>",
            "observation": f"Exit code: 0\n{filler}",
        },
        {
            "step": 1,
            "assistant": "Run the tests.\n"
            "<function=execute_bash><parameter=command>pytest</parameter></function>",
            "observation": f"Exit code: {0 if resolved else 1}\n{marker}",
        },
        {"step": 2, "assistant": "Done.\n<function=finish></function>"},
    )
    status = "resolved" if resolved else "unresolved"
    return Trajectory(
        task_id=task_id,
        rollout_index=index,
        policy_version=0,
        prompt_ids=(1,),
        token_ids=(1,),
        loss_mask=(0,),
        sampler_logprobs=(0.0,),
        reward=float(resolved),
        stop_reason=StopReason.finished,
        infra_error=infra_error,
        num_steps=3,
        patch=f"--- a/{filler.split()[0]}.py\n+++ b/{filler.split()[0]}.py\n@@ -1 +1 @@\n-x\n+y\n"
        f"# {marker}\n",
        timings={},
        steps=steps,
        grade=GradeResult(task_id, status, float(resolved), True, resolved) if grade else None,
    )


def test_render_keeps_structure_and_condenses_longest_thoughts_first(tokenizer):
    long_thought = "alpha " * 2000
    steps = [
        RenderedStep("short thought", "<function=finish></function>", "obs one"),
        RenderedStep(long_thought, "<function=execute_bash>ls</function>", "obs two"),
        RenderedStep("medium " * 200, "<function=search>x</function>", "obs three"),
    ]
    prompt = VerifierPrompt(tokenizer, max_prompt_tokens=900)
    ids = prompt.prompt_ids("The bug: add subtracts.", steps, "+return a + b")
    assert len(ids) <= 900
    text = tokenizer.decode(ids)
    assert text.endswith("<|im_start|>assistant\n" + ANSWER_PREFIX)
    for kept in (
        "short thought",
        "obs one",
        "obs two",
        "obs three",
        "+return a + b",
        "add subtracts",
        "<function=execute_bash>ls</function>",
        "<step 3>",
    ):
        assert kept in text
    assert "characters condensed" in text and text.count("alpha") < 2000
    # Roomy budget: nothing condensed, the whole text is there.
    full = tokenizer.decode(
        VerifierPrompt(tokenizer, max_prompt_tokens=100_000).prompt_ids(
            "The bug: add subtracts.", steps, "+return a + b"
        )
    )
    assert "condensed" not in full and full.count("alpha") == 2000
    with pytest.raises(ValueError, match="raise verifier.max_prompt_tokens"):
        VerifierPrompt(tokenizer, max_prompt_tokens=50).prompt_ids("issue", steps, "patch")


def test_trajectory_steps_split_thought_from_call():
    steps = trajectory_steps(make_trajectory("t", 0, resolved=True))
    assert steps[0].thought.startswith("<think>Where is") and steps[0].thought.endswith("look.")
    assert steps[0].action.startswith("<function=execute_bash>")
    assert steps[1].observation.endswith("ALL TESTS PASSED")
    assert steps[2] == RenderedStep("Done.", "<function=finish></function>", "")


def test_selection_caps_two_per_task_and_balances():
    trajectories = []
    for i in range(5):  # task a: 5 resolved, 1 unresolved
        trajectories.append(make_trajectory("a", i, resolved=True))
    trajectories.append(make_trajectory("a", 5, resolved=False))
    for i in range(4):  # task b: 4 unresolved
        trajectories.append(make_trajectory("b", i, resolved=False))
    for i in range(3):  # task c: 3 unresolved, plus ungraded and infra-error ones
        trajectories.append(make_trajectory("c", i, resolved=False))
    trajectories.append(make_trajectory("c", 3, resolved=True, grade=False))
    trajectories.append(make_trajectory("c", 4, resolved=True, infra_error=True))
    chosen = select_verifier_trajectories(trajectories, seed=0)
    labels = [t.resolved for t in chosen]
    # positives: 2 (task a, capped); negatives: 1 + 2 + 2 capped, subsampled to 2.
    assert labels.count(True) == 2 and labels.count(False) == 2
    assert all(t.grade is not None and not t.infra_error for t in chosen)
    for task in "abc":
        for label in (True, False):
            assert sum(t.task_id == task and t.resolved == label for t in chosen) <= 2
    assert chosen == select_verifier_trajectories(trajectories, seed=0)  # seeded


def test_micro_batch_trains_on_the_answer_tokens_only():
    examples = [
        VerifierExample("a", 0, True, (5, 6, 7), (11, 12)),
        VerifierExample("b", 0, False, (5, 6, 7, 8, 9), (13,)),
    ]
    batch = verifier_micro_batch(examples, rows=4)
    assert batch.shape == (4, 8)
    np.testing.assert_array_equal(batch.input_ids[0, :4], [5, 6, 7, 11])
    np.testing.assert_array_equal(batch.targets[0, :4], [6, 7, 11, 12])
    np.testing.assert_array_equal(batch.loss_mask[0], [0, 0, 1, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(batch.loss_mask[1], [0, 0, 0, 0, 1, 0, 0, 0])
    assert batch.targets[1, 4] == 13 and not batch.segment_ids[2:].any()


def test_roc_auc_counts_ties_as_half():
    assert roc_auc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert roc_auc([0.5, 0.5], [True, False]) == 0.5
    assert roc_auc([0.2, 0.6, 0.4, 0.6], [True, True, False, False]) == pytest.approx(0.375)
    with pytest.raises(ValueError, match="resolved and unresolved"):
        roc_auc([0.1], [True])


def test_score_is_yes_over_yes_plus_no_at_the_answer_position(tokenizer):
    config = Qwen3Config(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
    )
    model = Qwen3ForCausalLM(config, rngs=nnx.Rngs(3))
    mesh = make_mesh()
    shard_model(model, mesh)
    prompt = VerifierPrompt(tokenizer, max_prompt_tokens=1024)
    prompts = [
        prompt.trajectory_prompt_ids(make_trajectory("t", i, resolved=i % 2 == 0), "Fix it.")
        for i in range(3)
    ]
    graphdef, params = nnx.split(model, nnx.Param)
    scores = VerifierScorer(graphdef, prompt, mesh=mesh, batch_size=8)(params, prompts)
    for ids, score in zip(prompts, scores, strict=True):
        logits = np.asarray(jax.jit(lambda m, x: m(x))(model, np.asarray([ids])))[0, -1]
        probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        expected = probs[prompt.yes_id] / (probs[prompt.yes_id] + probs[prompt.no_id])
        assert score == pytest.approx(expected, abs=1e-5)
    assert prompt.yes_id == tokenizer.encode_text("YES")[0] != prompt.no_id


def synthetic_set(num_tasks=24):
    """num_tasks tasks x 5 graded trajectories (2-3 resolved), problem statements by task."""
    rng = np.random.default_rng(0)
    trajectories, statements = [], {}
    for task in range(num_tasks):
        task_id = f"task-{task}"
        statements[task_id] = f"Issue {task}: {' '.join(rng.choice(WORDS, 6))}."
        labels = rng.permutation([True, True, False, False, bool(rng.integers(2))])
        for index, resolved in enumerate(labels):
            trajectories.append(make_trajectory(task_id, index, resolved=bool(resolved), rng=rng))
    return trajectories, statements


def test_training_learns_a_recoverable_label_and_saves_a_loadable_verifier(tmp_path):
    trajectories, statements = synthetic_set()
    config = verifier_tiny.get_config()  # the tiny Qwen3, random init, full fine-tuning
    config.verifier.update(steps=20, eval_every=10, batch_size=8, heldout_fraction=0.25)
    summary = train_verifier(config, tmp_path, trajectories, statements)
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").open()]
    assert [row["step"] for row in metrics] == list(range(21))
    assert metrics[-1]["train/loss"] < metrics[1]["train/loss"]
    assert summary["auc"] > 0.8 and summary["auc"] > metrics[0]["heldout/auc"], summary
    assert summary["train_resolved"] * 2 == summary["train_examples"]  # balanced
    assert summary["heldout_examples"] == 6 * 5  # every graded trajectory of 6 held-out tasks
    # The saved verifier scores the held-out set as at the end of training.
    _, heldout = split_by_task(trajectories, 0.25, config.seed)
    verifier = load_verifier(tmp_path / "verifier", batch_size=8)
    scores = verifier.score(heldout, statements)
    labels = [t.resolved for t in heldout]
    assert roc_auc(scores, labels) == pytest.approx(summary["auc"], abs=1e-6)


def test_lora_training_changes_only_the_adapted_kernels(tmp_path):
    trajectories, statements = synthetic_set(num_tasks=4)
    config = verifier_tiny.get_config()
    config.model.update(hidden_size=32, intermediate_size=64, num_hidden_layers=1, head_dim=16)
    config.verifier.update(
        steps=2, eval_every=2, batch_size=8, lora_rank=4, lora_targets=("q_proj", "down_proj")
    )
    train_verifier(config, tmp_path, trajectories, statements)
    mesh = make_mesh()
    initial = nnx.to_pure_dict(initial_params(config, mesh, sharding_rules(config)))
    saved = load_verifier(tmp_path / "verifier", mesh=mesh).params
    saved = nnx.to_pure_dict(saved)
    for name in ("q_proj", "down_proj"):
        assert not np.allclose(saved["layers"][name], initial["layers"][name])
    for name in ("k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "input_layernorm"):
        np.testing.assert_array_equal(saved["layers"][name], initial["layers"][name])
    np.testing.assert_array_equal(saved["embed_tokens"], initial["embed_tokens"])
