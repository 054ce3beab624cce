"""Train state and the sharded update with gradient accumulation.

One optimizer step over the micro-batches of a `TrainBatch` (experiment.make_trainer builds
the trainer a config describes; the optimizer comes from rl/optimizer.py, the objective from
rl/objectives.py):

    trainer = Trainer(model, make_optimizer(OptimizerSettings(lr=1e-6)), LossSettings(), mesh=mesh)
    state = trainer.init_state(params)                    # nnx.State of a Qwen3ForCausalLM
    old = [trainer.logprobs(state.params, mb) for mb in batch.micro_batches]  # if reused
    state, metrics = trainer.step(state, batch.micro_batches, old_logprobs=old)

Each micro-batch runs one jitted forward/backward that adds its gradient of the loss *sum*
and its (sum, denominator) pair to running totals (buffers donated); one jitted update then
divides by the total denominator, so k micro-batches give exactly the gradient of one big
batch. Micro-batches may have different length buckets; each bucket compiles once. A step of a
single micro-batch is one compiled program instead (forward, backward and update, state
donated): no zeroed gradient buffer to add into and no second pass over the gradient, the
same arithmetic (0 + g is g).

Only the parameters matching `trainable` (an nnx filter; all by default) are differentiated,
accumulated and seen by the optimizer; the rest are frozen inputs (LoRA:
`Trainer(..., trainable=LoRAParam)` keeps no gradient or optimizer state for the base weights).

The objective is pluggable (`MicroBatchLoss`): GRPO++ (`PolicyGradientLoss`) by default;
supervised losses (rl/sft.py) train on the same machinery.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from deepswe_jax.model import Qwen3ForCausalLM
from deepswe_jax.parallel import DEFAULT_RULES, batch_sharding, state_shardings, use_rules
from deepswe_jax.rl.batch import MicroBatch
from deepswe_jax.rl.flops import training_flops
from deepswe_jax.rl.logprobs import loss_position_index, scored_logprobs
from deepswe_jax.rl.objectives import LossSettings, MicroBatchLoss, PolicyGradientLoss


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TrainState:
    """step: int32 scalar (optimizer steps taken); params: the model's nnx.Param state, frozen
    parameters included; opt_state: the optax state of the trainable parameters (its moments
    mirror them, shardings included)."""

    step: jax.Array
    params: nnx.State
    opt_state: optax.OptState


def _merge_sums(a: dict[str, jax.Array], b: dict[str, jax.Array]) -> dict[str, jax.Array]:
    """Combines metric sums: keys ending in _min / _max by min / max, the rest by addition."""
    out = {}
    for key, value in b.items():
        if key.endswith("_min"):
            out[key] = jnp.minimum(a[key], value)
        elif key.endswith("_max"):
            out[key] = jnp.maximum(a[key], value)
        else:
            out[key] = a[key] + value
    return out


def _batch_arrays(micro_batch: MicroBatch) -> dict[str, np.ndarray]:
    return {
        field.name: getattr(micro_batch, field.name) for field in dataclasses.fields(micro_batch)
    }


class Trainer:
    """The jitted, sharded functions of training for one model architecture, objective and mesh.

    Args:
      model: a Qwen3ForCausalLM (real or from nnx.eval_shape); only its structure, dtypes and
        remat policy are used.
      optimizer: e.g. make_optimizer(OptimizerSettings(...)).
      loss: LossSettings (log-prob chunking and temperature; GRPO++ hyperparameters).
      loss_fn: the per-micro-batch objective; None = GRPO++, PolicyGradientLoss(loss).
      mesh: device mesh (deepswe_jax.parallel.make_mesh); rules: logical->mesh table.
      peak_flops_per_device: for the MFU metric (e.g. 989e12 for H100 bf16 dense); None = no MFU.
      learning_rate: the optimizer's schedule, to report the rate each step used; None = not
        reported.
      trainable: nnx filter of the parameters that train (e.g. lora.LoRAParam); the others get
        no gradient and no optimizer state, and grad_norm / update_norm cover the trainable ones.
      packed_rows: whether a row may hold several sequences (rl.batch pack_length); False lets
        the attention kernel take sequence lengths instead of segments (cuDNN), and a
        micro-batch with a packed row is refused.
    """

    def __init__(
        self,
        model: Qwen3ForCausalLM,
        optimizer: optax.GradientTransformation,
        loss: LossSettings,
        *,
        mesh: Mesh,
        rules: Sequence[tuple[str, Any]] = DEFAULT_RULES,
        peak_flops_per_device: float | None = None,
        learning_rate: optax.Schedule | None = None,
        loss_fn: MicroBatchLoss | None = None,
        trainable: nnx.filterlib.Filter = nnx.Param,
        packed_rows: bool = True,
    ):
        self.graphdef, params = nnx.split(model, nnx.Param)
        self.packed_rows = packed_rows
        abstract_params = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), params)
        self._abstract_params = abstract_params
        self.trainable = trainable
        if not jax.tree.leaves(self._split_trainable(abstract_params)[0]):
            raise ValueError(
                f"no parameter of the model matches trainable={trainable!r}; pass a filter that "
                "selects what should train (e.g. LoRAParam after apply_lora, or nnx.Param for all)"
            )
        self._metric_shapes: dict[tuple, dict[str, tuple[int, ...]]] = {}
        self.model_config = model.config
        self.optimizer = optimizer
        self.loss = loss
        self.loss_fn = PolicyGradientLoss(loss) if loss_fn is None else loss_fn
        self.mesh = mesh
        self.rules = tuple(rules)
        self.peak_flops_per_device = peak_flops_per_device
        self.learning_rate = learning_rate
        self.param_shardings = state_shardings(abstract_params, mesh, self.rules)
        self.gradient_shardings = state_shardings(
            self._split_trainable(abstract_params)[0], mesh, self.rules
        )
        self.batch_sharding = batch_sharding(mesh, 2, self.rules)
        # Shapes and dtypes of the train state (no arrays): restore targets of a checkpoint.
        self.abstract_state = jax.eval_shape(self._new_state, abstract_params)
        self.state_shardings = TrainState(
            step=self._replicated,
            params=self.param_shardings,
            opt_state=state_shardings(self.abstract_state.opt_state, mesh, self.rules),
        )
        self._init = jax.jit(self._new_state, out_shardings=self.state_shardings, donate_argnums=0)
        self._zero_grads = jax.jit(
            lambda params: jax.tree.map(jnp.zeros_like, self._split_trainable(params)[0]),
            out_shardings=self.gradient_shardings,
        )
        self._logprobs = jax.jit(self._score, out_shardings=self.batch_sharding)
        self._accumulate = jax.jit(
            self._accumulate_micro_batch,
            out_shardings=(self.gradient_shardings, self._replicated),
            donate_argnums=(1, 2),
        )
        self._update = jax.jit(
            self._apply_gradients,
            out_shardings=(self.state_shardings, self._replicated),
            donate_argnums=0,
        )
        self._single_step = jax.jit(
            self._single_micro_batch_step,
            out_shardings=(self.state_shardings, self._replicated),
            donate_argnums=0,
        )

    @property
    def _replicated(self) -> NamedSharding:
        return NamedSharding(self.mesh, PartitionSpec())

    def _split_trainable(self, params: nnx.State) -> tuple[nnx.State, nnx.State]:
        """(trainable, frozen) parts of `params`; nnx.merge_state(trainable, frozen) restores it."""
        return nnx.split_state(params, self.trainable, ...)

    def _new_state(self, params: nnx.State) -> TrainState:
        trainable, _ = self._split_trainable(params)
        return TrainState(jnp.zeros((), jnp.int32), params, self.optimizer.init(trainable))

    def _token_logprobs(
        self, params: nnx.State, batch: dict[str, jax.Array]
    ) -> tuple[jax.Array, jax.Array]:
        model = nnx.merge(self.graphdef, params)
        hidden = model.hidden_states(
            batch["input_ids"], batch["positions"], batch["segment_ids"], packed=self.packed_rows
        )
        return scored_logprobs(
            hidden,
            model.unembed_matrix().astype(model.dtype),
            batch["targets"],
            batch.get("loss_index"),
            chunk_size=self.loss.logprob_chunk,
            temperature=self.loss.temperature,
        )

    def _score(self, params: nnx.State, batch: dict[str, jax.Array]) -> jax.Array:
        return self._token_logprobs(params, batch)[0]

    def _micro_batch_gradients(
        self, params: nnx.State, batch: dict[str, jax.Array], old_logprobs: jax.Array | None
    ) -> tuple[nnx.State, dict[str, jax.Array]]:
        """Gradient of one micro-batch's loss sum w.r.t. the trainable params, and its metric sums
        (see `_merge_sums`)."""
        trainable, frozen = self._split_trainable(params)

        def loss_sum(trainable: nnx.State):
            logprobs, entropy = self._token_logprobs(nnx.merge_state(trainable, frozen), batch)
            # One update per batch (DeepSWE): the old policy is the current one, exactly.
            old = jax.lax.stop_gradient(logprobs) if old_logprobs is None else old_logprobs
            total, denominator, metrics = self.loss_fn(
                logprobs, entropy, {**batch, "old_logprobs": old}
            )
            return total, (denominator, metrics, entropy)

        (total, (denominator, metrics, entropy)), grads = jax.value_and_grad(
            loss_sum, has_aux=True
        )(trainable)
        mask = batch["loss_mask"]
        sums = {
            "loss_sum": total,
            "denominator": denominator,
            "loss_tokens": (mask > 0).sum().astype(jnp.float32),
            "entropy_sum": jnp.where(mask > 0, entropy, 0.0).sum(),
            "sequence_tokens": (batch["segment_ids"] > 0).sum().astype(jnp.float32),
        }
        return grads, {**sums, **metrics}

    def _accumulate_micro_batch(
        self,
        params: nnx.State,
        grads: nnx.State,
        sums: dict[str, jax.Array],
        batch: dict[str, jax.Array],
        old_logprobs: jax.Array | None,
    ) -> tuple[nnx.State, dict[str, jax.Array]]:
        micro_grads, micro_sums = self._micro_batch_gradients(params, batch, old_logprobs)
        return jax.tree.map(jnp.add, grads, micro_grads), _merge_sums(sums, micro_sums)

    def _initial_sums(self, batch: dict[str, jax.Array]) -> dict[str, jax.Array]:
        """Identity elements of `_merge_sums` for every metric key of `batch`'s loss, replicated."""
        # Tracing the model to learn the loss's metric keys costs as much as a small model's
        # step: do it once per batch signature.
        signature = tuple((name, x.shape, x.dtype) for name, x in sorted(batch.items()))
        if signature not in self._metric_shapes:
            _, abstract_sums = jax.eval_shape(
                self._micro_batch_gradients, self._abstract_params, batch, None
            )
            self._metric_shapes[signature] = {k: v.shape for k, v in abstract_sums.items()}
        values = {
            key: np.full(
                shape,
                np.inf if key.endswith("_min") else -np.inf if key.endswith("_max") else 0,
                np.float32,
            )
            for key, shape in self._metric_shapes[signature].items()
        }
        return jax.device_put(values, self._replicated)

    def _apply_gradients(
        self, state: TrainState, grads: nnx.State, denominator: jax.Array
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        grads = jax.tree.map(lambda g: g / jnp.maximum(denominator, 1e-8), grads)
        trainable, frozen = self._split_trainable(state.params)
        updates, opt_state = self.optimizer.update(grads, state.opt_state, trainable)
        params = nnx.merge_state(optax.apply_updates(trainable, updates), frozen)
        metrics = {"grad_norm": optax.tree.norm(grads), "update_norm": optax.tree.norm(updates)}
        return TrainState(state.step + 1, params, opt_state), metrics

    def _single_micro_batch_step(
        self, state: TrainState, batch: dict[str, jax.Array], old_logprobs: jax.Array | None
    ) -> tuple[TrainState, dict[str, jax.Array]]:
        """`accumulate_gradients` + `_apply_gradients` of one micro-batch, as one program."""
        grads, sums = self._micro_batch_gradients(state.params, batch, old_logprobs)
        state, update_metrics = self._apply_gradients(state, grads, sums["denominator"])
        return state, {**sums, **update_metrics}

    def init_state(self, params: nnx.State) -> TrainState:
        """Places `params` (nnx.split(model, nnx.Param)[1]; donated) on the mesh, with fresh
        optimizer state."""
        params = jax.device_put(params, self.param_shardings, donate=True)
        with jax.set_mesh(self.mesh), use_rules(self.rules):
            return self._init(params)

    def _put(self, array: np.ndarray) -> jax.Array:
        spec = self.batch_sharding.spec
        axes = spec[0] if len(spec) else None
        axes = (axes,) if isinstance(axes, str) else tuple(axes or ())
        ways = math.prod(self.mesh.shape[axis] for axis in axes)
        if array.shape[0] % ways:
            raise ValueError(
                f"a micro-batch of {array.shape[0]} rows does not split over the {ways}-way batch "
                f"sharding {axes}; make config.rl.micro_batch_size a multiple of {ways}"
            )
        return jax.make_array_from_process_local_data(self.batch_sharding, array)

    def _device_batch(
        self, micro_batch: MicroBatch, *, loss_positions_only: bool = True
    ) -> dict[str, jax.Array]:
        """The micro-batch's arrays on the mesh; with `loss_positions_only`, also "loss_index"
        (rl/logprobs.py `loss_position_index`) when LossSettings.loss_position_buckets allows."""
        if not self.packed_rows and micro_batch.segment_ids.max(initial=0) > 1:
            raise ValueError(
                "a micro-batch row holds several packed sequences, but this Trainer was built "
                "with packed_rows=False (one sequence per row); build it with packed_rows=True"
            )
        arrays = _batch_arrays(micro_batch)
        # Each process sees only its own rows, so processes could pick different capacities:
        # with several, every position is scored.
        single_process = jax.process_count() == 1
        buckets = self.loss.loss_position_buckets if loss_positions_only and single_process else 1
        index = loss_position_index(micro_batch.loss_mask, buckets)
        if index is not None:
            arrays["loss_index"] = index
        return {name: self._put(array) for name, array in arrays.items()}

    def logprobs(self, params: nnx.State, micro_batch: MicroBatch) -> jax.Array:
        """[rows, length] log-probs of the micro-batch's targets under `params` (old log-probs)."""
        with jax.set_mesh(self.mesh), use_rules(self.rules):
            batch = self._device_batch(micro_batch, loss_positions_only=False)
            return self._logprobs(params, batch)

    def compile_accumulation(
        self, params: nnx.State, micro_batch: MicroBatch
    ) -> jax.stages.Compiled:
        """The compiled per-micro-batch step of `accumulate_gradients` for `micro_batch`'s shape
        (forward, backward, add to the accumulated gradient), e.g. for `.memory_analysis()`.

        `params`: placed like `param_shardings`, or jax.ShapeDtypeStructs carrying them.
        """
        with jax.set_mesh(self.mesh), use_rules(self.rules):
            batch = self._device_batch(micro_batch)
            grads = jax.eval_shape(self._zero_grads, params)
            return self._accumulate.lower(
                params, grads, self._initial_sums(batch), batch, None
            ).compile()

    def accumulate_gradients(
        self,
        params: nnx.State,
        micro_batches: Sequence[MicroBatch],
        old_logprobs: Sequence[jax.Array] | None = None,
    ) -> tuple[nnx.State, dict[str, jax.Array]]:
        """Gradient of the summed loss over all micro-batches, and the metric sums.

        `params`: all parameters; the gradient covers the trainable ones only. The gradient of
        the batch loss is `grads / sums["denominator"]`; `step` applies it.
        """
        if not micro_batches:
            raise ValueError("no micro-batches to train on; skip the step when a batch is empty")
        if old_logprobs is not None and len(old_logprobs) != len(micro_batches):
            raise ValueError(
                f"got {len(old_logprobs)} old log-prob arrays for {len(micro_batches)} micro-batches"
            )
        with jax.set_mesh(self.mesh), use_rules(self.rules):
            grads = self._zero_grads(params)
            sums = None
            for index, micro_batch in enumerate(micro_batches):
                old = None if old_logprobs is None else old_logprobs[index]
                batch = self._device_batch(micro_batch)
                if sums is None:
                    sums = self._initial_sums(batch)
                grads, sums = self._accumulate(params, grads, sums, batch, old)
        return grads, sums

    def step(
        self,
        state: TrainState,
        micro_batches: Sequence[MicroBatch],
        old_logprobs: Sequence[jax.Array] | None = None,
    ) -> tuple[TrainState, dict[str, float]]:
        """One optimizer step over all `micro_batches` (state donated).

        Args:
          old_logprobs: per micro-batch, from `logprobs` before the first update on this batch;
            None when each batch gets a single update (then old == current, exactly).
        Returns:
          (new state, metrics as Python floats).
        """
        start = time.perf_counter()
        if len(micro_batches) == 1 and (old_logprobs is None or len(old_logprobs) == 1):
            with jax.set_mesh(self.mesh), use_rules(self.rules):
                old = None if old_logprobs is None else old_logprobs[0]
                batch = self._device_batch(micro_batches[0])
                state, sums = self._single_step(state, batch, old)
        else:
            grads, sums = self.accumulate_gradients(state.params, micro_batches, old_logprobs)
            with jax.set_mesh(self.mesh), use_rules(self.rules):
                state, update_metrics = self._update(state, grads, sums["denominator"])
            sums = {**sums, **update_metrics}
        host = jax.device_get({**sums, "step": state.step})
        elapsed = time.perf_counter() - start
        return state, self._finalize(host, micro_batches, elapsed)

    def _finalize(
        self, host: dict[str, Any], micro_batches: Sequence[MicroBatch], elapsed: float
    ) -> dict[str, float]:
        loss_tokens = max(float(host["loss_tokens"]), 1.0)
        metrics = {
            "step": float(host["step"]),
            "loss": float(host["loss_sum"]) / max(float(host["denominator"]), 1e-8),
            "loss_denominator": float(host["denominator"]),
            **self.loss_fn.summarize(host),
            "entropy": float(host["entropy_sum"]) / loss_tokens,
            "grad_norm": float(host["grad_norm"]),
            "update_norm": float(host["update_norm"]),
            "loss_tokens": float(host["loss_tokens"]),
            "tokens": float(host["sequence_tokens"]),
            "step_time_s": elapsed,
            "tokens_per_s": float(host["sequence_tokens"]) / elapsed,
        }
        if self.learning_rate is not None:
            metrics["learning_rate"] = float(self.learning_rate(host["step"] - 1))
        if self.peak_flops_per_device:
            peak = self.peak_flops_per_device * self.mesh.size
            flops = training_flops(self.model_config, micro_batches)
            metrics["mfu"] = flops / (elapsed * peak)
        return metrics
