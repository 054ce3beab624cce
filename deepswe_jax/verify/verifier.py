"""Execution-free outcome verifier (SWE-Gym): a Qwen3 model that reads a graded trajectory and
answers whether its final patch resolves the issue.

The prompt (`VerifierPrompt.prompt_ids`) is a chat: a judge system prompt, then a user turn
with the trajectory rendered as text (`render_trajectory`: the issue, each step's assistant
output and observation, the final patch) and the question; the assistant turn is pre-filled up
to the answer: `<think>\\n\\n</think>\\n\\n<judgement>`. The model answers `YES` or `NO` (then
`</judgement>`). When the prompt exceeds the token budget the longest thoughts are condensed
first (their middles replaced by a marker), then the longest observations, then the issue and
the patch.

    score = p(YES) / (p(YES) + p(NO))  at the answer position
          = sigmoid(logit[YES] - logit[NO])            (first token of each answer)

`VerifierScorer` computes it for many prompts with one forward pass per batch. Training data
(`select_verifier_trajectories`, `verifier_examples`, `verifier_micro_batches`): graded
trajectories, at most 2 resolved and 2 unresolved per task, positives and negatives balanced
1:1; loss (rl.sft.NegativeLogLikelihoodLoss) on the answer tokens only.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from deepswe_jax.agent.chat import ChatTokenizer, Message
from deepswe_jax.agent.trajectory import Trajectory
from deepswe_jax.checkpoint import read_model_config, restore_params, restore_target, save_params
from deepswe_jax.model import Qwen3Config, Qwen3ForCausalLM
from deepswe_jax.parallel import (
    DEFAULT_RULES,
    batch_sharding,
    make_mesh,
    state_shardings,
    use_rules,
)
from deepswe_jax.parallel.sharding import Rules
from deepswe_jax.rl.batch import MicroBatch, bucket_length

JUDGE_SYSTEM_PROMPT = (
    "You are an expert software engineer who reviews the work of an AI coding agent. You are "
    "shown a GitHub issue, every step the agent took in the repository (its reasoning and tool "
    "calls, and what each tool returned) and the agent's final patch. Decide whether the final "
    "patch resolves the issue, so that the repository's hidden tests for it would pass."
)
JUDGE_QUESTION = (
    "Does the agent's final patch resolve the issue? "
    "Answer <judgement>YES</judgement> or <judgement>NO</judgement>."
)
# Qwen3's non-thinking turn opening, then the answer tag: the next token decides.
ANSWER_PREFIX = "<think>\n\n</think>\n\n<judgement>"
YES, NO = "YES", "NO"
FUNCTION_CALL_START = "<function="
CONDENSED_MARKER = "\n[... {count} characters condensed ...]\n"
MAX_PER_TASK = 2
MARKER_CHARS = len(CONDENSED_MARKER.format(count=10**6))


@dataclass(frozen=True)
class RenderedStep:
    """One agent turn as text: thought (reasoning before the tool call), action (the call),
    observation (the tool's output; "" for the final turn)."""

    thought: str
    action: str
    observation: str


def trajectory_steps(trajectory: Trajectory) -> list[RenderedStep]:
    """The agent turns of `trajectory` (Trajectory.steps records; env_error entries skipped)."""
    steps = []
    for record in trajectory.steps:
        if "assistant" not in record:
            continue
        text = record["assistant"]
        call = text.rfind(FUNCTION_CALL_START)
        thought, action = (text, "") if call < 0 else (text[:call], text[call:])
        steps.append(RenderedStep(thought.strip(), action.strip(), record.get("observation", "")))
    return steps


def render_trajectory(problem_statement: str, steps: Sequence[RenderedStep], patch: str) -> str:
    """The user-turn text the verifier reads: issue, numbered steps, final patch, question."""
    parts = [f"<issue>\n{problem_statement.strip()}\n</issue>\n"]
    for number, step in enumerate(steps, start=1):
        parts.append(f"<step {number}>")
        if step.thought:
            parts.append(f"<thought>\n{step.thought}\n</thought>")
        if step.action:
            parts.append(f"<action>\n{step.action}\n</action>")
        if step.observation:
            parts.append(f"<observation>\n{step.observation}\n</observation>")
        parts.append(f"</step {number}>\n")
    parts.append(f"<final_patch>\n{patch.strip() or '(empty: no changes)'}\n</final_patch>\n")
    parts.append(JUDGE_QUESTION)
    return "\n".join(parts)


def condense(text: str, keep_chars: int) -> str:
    """`text` with its middle replaced by a marker so that about `keep_chars` characters of it
    remain (head and tail halves); unchanged when it is already that short."""
    if len(text) <= keep_chars:
        return text
    head = keep_chars // 2
    tail = keep_chars - head
    marker = CONDENSED_MARKER.format(count=len(text) - keep_chars)
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


def water_level(lengths: Sequence[int], excess: int) -> int:
    """The largest cap c with sum(max(0, l - c)) >= excess (0 when even c = 0 removes less):
    cutting every length down to c trims the longest ones first."""
    low, high = 0, max(lengths, default=0)
    while low < high:
        middle = (low + high + 1) // 2
        if sum(max(0, length - middle) for length in lengths) >= excess:
            low = middle
        else:
            high = middle - 1
    return low


class VerifierPrompt:
    """Token ids of verifier prompts and answers for one tokenizer and prompt budget.

    Args:
      tokenizer: the verifier model's ChatTokenizer.
      max_prompt_tokens: budget of a whole prompt (system turn to answer prefix); longer
        renderings are condensed (see the module docstring).
    """

    def __init__(self, tokenizer: ChatTokenizer, *, max_prompt_tokens: int):
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self.yes_ids = tuple(tokenizer.encode_text(YES))
        self.no_ids = tuple(tokenizer.encode_text(NO))
        if self.yes_ids[0] == self.no_ids[0]:
            raise ValueError(
                f"{YES!r} and {NO!r} start with the same token ({self.yes_ids[0]}), so one "
                "answer position cannot tell them apart; use a tokenizer that splits them apart"
            )
        self._answer_prefix_ids = tuple(tokenizer.encode_text(ANSWER_PREFIX))

    @property
    def yes_id(self) -> int:
        """The token whose probability is p(YES) at the answer position."""
        return self.yes_ids[0]

    @property
    def no_id(self) -> int:
        return self.no_ids[0]

    def _ids(self, user_text: str) -> list[int]:
        messages = [Message("system", JUDGE_SYSTEM_PROMPT), Message("user", user_text)]
        return self.tokenizer.prompt_ids(messages) + list(self._answer_prefix_ids)

    def prompt_ids(
        self, problem_statement: str, steps: Sequence[RenderedStep], patch: str
    ) -> list[int]:
        """Prompt ids ending right before the answer token, within `max_prompt_tokens`.

        Over budget, texts are condensed group by group (thoughts, then observations, then the
        issue and the patch), each group longest first: every text of the group is cut to a
        common length, the largest one that removes the excess.
        Raises ValueError when even fully condensed text does not fit (raise the budget).
        """
        groups = {
            "thoughts": [step.thought for step in steps],
            "observations": [step.observation for step in steps],
            "issue_and_patch": [problem_statement, patch],
        }
        actions = [step.action for step in steps]
        caps = {kind: [len(text) for text in texts] for kind, texts in groups.items()}

        def current_ids() -> tuple[list[int], int]:
            shown = {
                kind: [condense(text, cap) for text, cap in zip(texts, caps[kind], strict=True)]
                for kind, texts in groups.items()
            }
            rendered = [
                RenderedStep(thought, action, observation)
                for thought, action, observation in zip(
                    shown["thoughts"], actions, shown["observations"], strict=True
                )
            ]
            issue, final_patch = shown["issue_and_patch"]
            text = render_trajectory(issue, rendered, final_patch)
            return self._ids(text), len(text)

        ids, num_chars = current_ids()
        for kind in groups:
            for _ in range(8):  # each pass refines the characters-per-token estimate
                if len(ids) <= self.max_prompt_tokens:
                    return ids
                excess = math.ceil((len(ids) - self.max_prompt_tokens) * num_chars / len(ids))
                first_guess = water_level(caps[kind], excess)
                num_cut = sum(cap > first_guess for cap in caps[kind])
                level = water_level(caps[kind], excess + MARKER_CHARS * num_cut)
                new_caps = [min(cap, level) for cap in caps[kind]]
                if new_caps == caps[kind]:
                    break
                caps[kind] = new_caps
                ids, num_chars = current_ids()
        if len(ids) <= self.max_prompt_tokens:
            return ids
        raise ValueError(
            f"a verifier prompt needs {len(ids)} tokens with every text condensed (budget "
            f"{self.max_prompt_tokens}); raise verifier.max_prompt_tokens"
        )

    def trajectory_prompt_ids(self, trajectory: Trajectory, problem_statement: str) -> list[int]:
        """`prompt_ids` of a trajectory (its steps and final patch)."""
        return self.prompt_ids(problem_statement, trajectory_steps(trajectory), trajectory.patch)

    def answer_ids(self, resolved: bool) -> tuple[int, ...]:
        """The training target after the prompt: the tokens of YES or NO."""
        return self.yes_ids if resolved else self.no_ids


def has_label(trajectory: Trajectory) -> bool:
    """The trajectory can teach the verifier: it was graded and no container or grader failure
    spoiled it (`infra_error` covers a grade with status infra_error). Its label is
    `trajectory.resolved`: did the grader resolve the final patch."""
    return trajectory.grade is not None and not trajectory.infra_error


def select_verifier_trajectories(
    trajectories: Sequence[Trajectory], *, max_per_task: int = MAX_PER_TASK, seed: int = 0
) -> list[Trajectory]:
    """Training trajectories for the verifier (SWE-Gym's recipe).

    Ungraded and infrastructure-error trajectories are dropped; of each task at most
    `max_per_task` resolved and `max_per_task` unresolved ones are kept (a seeded random
    choice); then the larger class is subsampled (seeded) to the size of the smaller, so
    positives and negatives are 1:1. Returned in input order.
    """
    rng = np.random.default_rng(seed)
    by_task: dict[str, dict[bool, list[int]]] = {}
    for index, trajectory in enumerate(trajectories):
        if has_label(trajectory):
            groups = by_task.setdefault(trajectory.task_id, {True: [], False: []})
            groups[trajectory.resolved].append(index)
    chosen: dict[bool, list[int]] = {True: [], False: []}
    for groups in by_task.values():
        for label, indices in groups.items():
            if len(indices) > max_per_task:
                indices = sorted(rng.choice(indices, max_per_task, replace=False).tolist())
            chosen[label].extend(indices)
    size = min(len(chosen[True]), len(chosen[False]))
    kept = []
    for indices in chosen.values():
        kept.extend(rng.choice(indices, size, replace=False).tolist() if indices else [])
    return [trajectories[index] for index in sorted(kept)]


@dataclass(frozen=True)
class VerifierExample:
    """One verifier training/evaluation item: prompt ids, answer ids (YES or NO tokens) and
    the label they encode."""

    task_id: str
    rollout_index: int
    resolved: bool
    prompt_ids: tuple[int, ...]
    answer_ids: tuple[int, ...]


def verifier_examples(
    trajectories: Sequence[Trajectory],
    problem_statements: Mapping[str, str],
    prompt: VerifierPrompt,
) -> list[VerifierExample]:
    """Examples of the graded trajectories (ungraded / infra-error ones skipped).

    problem_statements: task id -> issue text (`Task.problem_statement`).
    """
    examples = []
    for trajectory in trajectories:
        if not has_label(trajectory):
            continue
        label = trajectory.resolved
        if trajectory.task_id not in problem_statements:
            raise KeyError(
                f"no problem statement for task {trajectory.task_id!r}; pass the task file the "
                "trajectories were collected on"
            )
        ids = prompt.trajectory_prompt_ids(trajectory, problem_statements[trajectory.task_id])
        examples.append(
            VerifierExample(
                trajectory.task_id,
                trajectory.rollout_index,
                label,
                tuple(ids),
                prompt.answer_ids(label),
            )
        )
    return examples


def verifier_micro_batch(examples: Sequence[VerifierExample], rows: int) -> MicroBatch:
    """One row per example (padded with empty rows to `rows`, length to a power of two):
    the prompt then the answer, loss mask 1 exactly on the answer tokens' targets."""
    if not 0 < len(examples) <= rows:
        raise ValueError(f"need 1..{rows} examples for a micro-batch of {rows} rows")
    sequences = [example.prompt_ids + example.answer_ids for example in examples]
    length = bucket_length(max(len(sequence) for sequence in sequences) - 1)
    arrays = {
        name: np.zeros((rows, length), dtype)
        for name, dtype in (
            ("input_ids", np.int32),
            ("targets", np.int32),
            ("positions", np.int32),
            ("segment_ids", np.int32),
            ("loss_mask", np.float32),
            ("advantages", np.float32),
            ("sampler_logprobs", np.float32),
        )
    }
    for row, (example, sequence) in enumerate(zip(examples, sequences, strict=True)):
        n = len(sequence) - 1
        arrays["input_ids"][row, :n] = sequence[:-1]
        arrays["targets"][row, :n] = sequence[1:]
        arrays["positions"][row, :n] = np.arange(n)
        arrays["segment_ids"][row, :n] = 1
        # target t is sequence[t + 1]: the answer tokens are the last len(answer) targets.
        arrays["loss_mask"][row, n - len(example.answer_ids) : n] = 1.0
    return MicroBatch(**arrays)


class VerifierScorer:
    """p(YES) / (p(YES) + p(NO)) at the answer position, batched and sharded over the mesh.

    Args:
      graphdef: nnx.split(model, nnx.Param)[0] of the verifier model (plain or LoRA).
      prompt: the VerifierPrompt whose answer tokens are compared.
      mesh, rules: where the parameters live and how batches are sharded.
      batch_size: prompts per forward pass (a multiple of the batch sharding).
    """

    def __init__(
        self,
        graphdef: nnx.GraphDef,
        prompt: VerifierPrompt,
        *,
        mesh: Mesh,
        rules: Rules = DEFAULT_RULES,
        batch_size: int = 8,
    ):
        self.graphdef = graphdef
        self.answer_ids = jnp.asarray([prompt.yes_id, prompt.no_id], jnp.int32)
        self.mesh = mesh
        self.rules = tuple(rules)
        self.batch_size = batch_size
        self._batch_sharding = batch_sharding(mesh, 2, self.rules)
        self._rows_sharding = batch_sharding(mesh, 1, self.rules)
        self._scores = jax.jit(self._forward, out_shardings=NamedSharding(mesh, PartitionSpec()))

    def _forward(
        self, params: nnx.State, input_ids: jax.Array, answer_positions: jax.Array
    ) -> jax.Array:
        """[rows, length] right-padded prompts, [rows] index of each prompt's last token ->
        [rows] scores."""
        model = nnx.merge(self.graphdef, params)
        hidden = model.hidden_states(input_ids)  # [rows, length, e]; causal, so padding is unseen
        last = jnp.take_along_axis(hidden, answer_positions[:, None, None], axis=1)[:, 0]
        unembed = model.unembed_matrix().astype(model.dtype)[:, self.answer_ids]  # [e, 2]
        logits = jnp.einsum("re,ea->ra", last, unembed, preferred_element_type=jnp.float32)
        return jax.nn.sigmoid(logits[:, 0] - logits[:, 1])

    def __call__(self, params: nnx.State, prompts: Sequence[Sequence[int]]) -> np.ndarray:
        """[len(prompts)] float scores in input order (prompts sorted by length into batches)."""
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        scores = np.zeros(len(prompts), np.float64)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            length = bucket_length(max(len(prompts[i]) for i in chunk))
            input_ids = np.zeros((self.batch_size, length), np.int32)
            answer_positions = np.zeros((self.batch_size,), np.int32)
            for row, index in enumerate(chunk):
                input_ids[row, : len(prompts[index])] = prompts[index]
                answer_positions[row] = len(prompts[index]) - 1
            with jax.set_mesh(self.mesh), use_rules(self.rules):
                batch_scores = self._scores(
                    params,
                    jax.make_array_from_process_local_data(self._batch_sharding, input_ids),
                    jax.make_array_from_process_local_data(self._rows_sharding, answer_positions),
                )
            scores[chunk] = np.asarray(jax.device_get(batch_scores))[: len(chunk)]
        return scores


def roc_auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve: the probability that a random positive scores above a random
    negative (ties count one half). Raises ValueError without both classes."""
    scores = np.asarray(scores, np.float64)
    labels = np.asarray(labels, bool)
    positives, negatives = scores[labels], scores[~labels]
    if not len(positives) or not len(negatives):
        raise ValueError(
            f"AUC needs resolved and unresolved items, got {len(positives)} and {len(negatives)}"
        )
    greater = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(positives) * len(negatives)))


class TrajectoryVerifier:
    """A trained verifier ready to score trajectories: model parameters, prompt, scorer.

    Load one written by launch/train_verifier.py with `load_verifier(directory)`.
    """

    def __init__(self, params: nnx.State, scorer: VerifierScorer, prompt: VerifierPrompt):
        self.params = params
        self.scorer = scorer
        self.prompt = prompt

    def score(
        self, trajectories: Sequence[Trajectory], problem_statements: Mapping[str, str]
    ) -> np.ndarray:
        """[len(trajectories)] scores p(YES) / (p(YES) + p(NO)), graded or not."""
        prompts = [
            self.prompt.trajectory_prompt_ids(t, problem_statements[t.task_id])
            for t in trajectories
        ]
        return self.scorer(self.params, prompts)


VERIFIER_PARAMS = "params"
VERIFIER_TOKENIZER = "tokenizer"
VERIFIER_SETTINGS = "verifier.json"


def save_verifier(
    directory: str | os.PathLike,
    params: nnx.State,
    *,
    model_config: Mapping[str, Any],
    tokenizer_dir: str | os.PathLike,
    max_prompt_tokens: int,
    compute_dtype: str,
) -> None:
    """Writes a self-contained verifier directory: params/ (Orbax parameters of a plain Qwen3,
    `checkpoint.save_params`; merge LoRA adapters first), tokenizer/ and verifier.json."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_params(directory / VERIFIER_PARAMS, params, model_config=model_config)
    shutil.copytree(tokenizer_dir, directory / VERIFIER_TOKENIZER)
    settings = {"max_prompt_tokens": max_prompt_tokens, "compute_dtype": compute_dtype}
    (directory / VERIFIER_SETTINGS).write_text(json.dumps(settings, indent=2) + "\n")


def load_verifier(
    directory: str | os.PathLike,
    *,
    mesh: Mesh | None = None,
    rules: Rules = DEFAULT_RULES,
    batch_size: int | None = None,
) -> TrajectoryVerifier:
    """Reads what `save_verifier` wrote, placing the parameters on `mesh` (default: all
    devices, FSDP). batch_size: prompts per forward pass (default: one per device)."""
    directory = Path(directory)
    if not (directory / VERIFIER_SETTINGS).is_file():
        raise FileNotFoundError(
            f"{directory} is not a verifier directory (no {VERIFIER_SETTINGS}); train one with "
            "`python launch/train_verifier.py` and pass its <workdir>/verifier"
        )
    settings = json.loads((directory / VERIFIER_SETTINGS).read_text())
    mesh = make_mesh() if mesh is None else mesh
    model_config = Qwen3Config.from_hf_dict(read_model_config(directory / VERIFIER_PARAMS))
    abstract = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(
            model_config, rngs=nnx.Rngs(0), dtype=jnp.dtype(settings["compute_dtype"])
        )
    )
    graphdef, abstract_params = nnx.split(abstract, nnx.Param)
    target = restore_target(abstract_params, state_shardings(abstract_params, mesh, rules))
    params = restore_params(directory / VERIFIER_PARAMS, target)
    prompt = VerifierPrompt(
        ChatTokenizer.from_directory(directory / VERIFIER_TOKENIZER),
        max_prompt_tokens=settings["max_prompt_tokens"],
    )
    scorer = VerifierScorer(
        graphdef, prompt, mesh=mesh, rules=rules, batch_size=batch_size or mesh.size
    )
    return TrajectoryVerifier(params, scorer, prompt)
