"""vLLM sampler: a vLLM engine in this process, fed the trainer's weights without a restart.

One thread owns the engine and is the only one that touches it. Callers never wait on it:

  * `generate` (any asyncio loop, any number at once) puts its requests on a queue and awaits
    futures; between two `engine.step()` calls the thread adds queued requests, so concurrent
    callers are batched continuously. Outputs are FINAL_ONLY (one per finished request, not a
    growing copy every step) and ids only (no tokenizer in the engine).
  * A `generate` whose caller is cancelled (the agent's step timeout) aborts its requests in the
    engine, so nothing it asked for keeps decoding.
  * If the engine raises, every waiting and later caller fails with an error naming the cause.
  * `sync_weights`, `sleep` and `wake` run on the same thread, between steps. `sync_weights`
    streams the weights a layer at a time (weight_stream.HFWeightExtractor, one jitted program)
    into vLLM's in-place reload, then resets the prefix cache (running requests are recomputed),
    so no cached prefix mixes old and new weights. The engine starts with dummy weights and
    `generate` refuses to run before the first sync, so step 0 never samples stale weights.

With several JAX processes, `processes_per_engine` consecutive processes share one engine, owned
by the first of them; the others take part in the weight extraction (a collective) and keep
nothing (`owns_engine` is False, and their `generate` refuses to run).

Logprobs: vLLM's `raw_logprobs`, log_softmax of the unscaled logits, which equal `JaxSampler`'s
and the trainer's at temperature 1 (the RL setting).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import itertools
import logging
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from deepswe_jax.model import Qwen3ForCausalLM
from deepswe_jax.sampling.base import (
    Completion,
    GenerateRequest,
    SamplingParams,
    check_prompt,
)
from deepswe_jax.sampling.prefix_cache import PrefillCounts
from deepswe_jax.sampling.vllm_engine import (
    VLLMSettings,
    WeightPusher,
    import_vllm,
    start_engine,
    write_engine_config,
)
from deepswe_jax.sampling.weight_stream import HFWeightExtractor, jax_to_torch

logger = logging.getLogger(__name__)


class EngineFailed(RuntimeError):
    """The vLLM engine raised; the sampler cannot continue (build a new one)."""


class VLLMSampler:
    """`Sampler` backed by an in-process vLLM engine.

    Args:
      model: the policy, real or abstract (`nnx.eval_shape`): only its structure and config are
        used, so a process that owns no engine never holds weights for it.
      settings: engine settings (config.sampler.*).
      hf_dir: a HF directory whose config.json describes the policy (weights are not read); ''
        builds the engine's config.json from `model.config`.
      processes_per_engine: consecutive JAX processes sharing one engine (the first owns it).
    """

    syncs_global_arrays = True  # sync_weights takes the trainer's sharded params, not a host copy

    def __init__(
        self,
        model: Qwen3ForCausalLM,
        settings: VLLMSettings,
        *,
        hf_dir: str = "",
        processes_per_engine: int = 1,
    ):
        if processes_per_engine < 1 or jax.process_count() % processes_per_engine:
            raise ValueError(
                f"config.sampler.processes_per_engine={processes_per_engine} must divide the "
                f"{jax.process_count()} JAX processes"
            )
        self.settings = settings
        self.owns_engine = jax.process_index() % processes_per_engine == 0
        self.vocab_size = model.config.vocab_size
        self._graphdef = nnx.split(model, nnx.Param)[0]
        self._extractor = HFWeightExtractor(
            self._graphdef, model.config, settings.dtype, untie=True
        )
        self.last_sync: dict[str, float] = {}
        self._synced = False
        self._asleep = False
        self._failure: BaseException | None = None
        self._closed = False
        self.prefill_counts = PrefillCounts()  # vLLM's prefix cache hits, as JaxSampler counts
        if jax.process_count() > 1:
            _connect_all_devices()
        if not self.owns_engine:
            return
        self._config_dir = tempfile.TemporaryDirectory(prefix="vllm-config-")
        write_engine_config(model.config, hf_dir, self._config_dir.name, settings.dtype)
        self._vllm = import_vllm()
        self._llm, self.platform, self.sleep_enabled = start_engine(
            settings, model.config, self._config_dir.name
        )
        self._engine = self._llm.llm_engine
        self._pusher = WeightPusher(
            self._llm, self._extractor.hf_shapes(), settings.tensor_parallel_size
        )
        self._request_ids = itertools.count()
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._commands: list[tuple[Callable[[], Any], concurrent.futures.Future | None]] = []
        self._wakeup = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="vllm-sampler", daemon=True)
        self._thread.start()

    # -- generation ------------------------------------------------------------------------

    def _vllm_params(self, params: SamplingParams, prompt_len: int):
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            # As JaxSampler: a completion ends with 'length' when the context is full.
            max_tokens=min(params.max_new_tokens, self.settings.max_model_len - prompt_len),
            stop_token_ids=list(params.stop_token_ids),
            seed=None if params.seed is None else params.seed % 2**32,
            ignore_eos=True,  # stop exactly on the caller's stop_token_ids, as JaxSampler does
            logprobs=0,  # the sampled token's logprob only
            detokenize=False,
            output_kind=self._vllm.sampling_params.RequestOutputKind.FINAL_ONLY,
        )

    def _check_request(self, request: GenerateRequest) -> None:
        check_prompt(
            request.prompt_ids,
            vocab_size=self.vocab_size,
            max_len=self.settings.max_model_len,
            max_len_name="max_model_len",
            remedy="raise config.agent.max_context / max_prompt_tokens",
        )

    def _check_usable(self) -> None:
        if not self.owns_engine:
            raise RuntimeError(
                f"process {jax.process_index()} owns no vLLM engine (processes_per_engine > 1: "
                "only the first process of each group rolls out)"
            )
        if self._failure is not None:
            raise EngineFailed(f"the vLLM engine failed earlier: {self._failure!r}")
        if self._closed:
            raise RuntimeError("VLLMSampler is closed; build a new one.")
        if self._asleep or not self._synced:
            raise RuntimeError(
                "VLLMSampler has no current weights (asleep, or never synced); call "
                "sync_weights(params) before generate"
            )

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[Completion]:
        """Completions for `requests`, in order; batched with every other concurrent caller."""
        self._check_usable()
        for request in requests:
            self._check_request(request)
        loop = asyncio.get_running_loop()
        ids = [f"r{next(self._request_ids)}" for _ in requests]
        futures = [loop.create_future() for _ in requests]
        for request_id, future in zip(ids, futures, strict=True):
            self._waiters[request_id] = (loop, future)

        def add() -> None:
            for request_id, request in zip(ids, requests, strict=True):
                if request_id not in self._waiters:  # cancelled while queued
                    continue
                if request.params.max_new_tokens == 0:  # vLLM refuses max_tokens=0
                    self._deliver(request_id, Completion((), (), "length"))
                    continue
                try:
                    vllm_params = self._vllm_params(request.params, len(request.prompt_ids))
                except ValueError as error:  # refused parameters fail this request only
                    self._deliver(request_id, error)
                    continue
                self._engine.add_request(
                    request_id, {"prompt_token_ids": list(request.prompt_ids)}, vllm_params
                )

        self._submit(add)
        try:
            return list(await asyncio.gather(*futures))
        except asyncio.CancelledError:
            for request_id in ids:
                self._waiters.pop(request_id, None)
            self._submit(lambda: self._engine.abort_request(ids))
            raise

    def num_unfinished_requests(self) -> int:
        """Requests the engine still holds (runs on the engine thread)."""
        return self._call(self._engine.get_num_unfinished_requests)

    # -- the engine thread -------------------------------------------------------------------

    def _submit(
        self, command: Callable[[], Any], done: concurrent.futures.Future | None = None
    ) -> None:
        """Queues `command` for the engine thread (its result or error goes to `done`)."""
        with self._wakeup:
            if self._failure is not None:
                raise EngineFailed(f"the vLLM engine failed earlier: {self._failure!r}")
            if self._closed:
                raise RuntimeError("VLLMSampler is closed; build a new one.")
            self._commands.append((command, done))
            self._wakeup.notify()

    def _call(self, function: Callable[[], Any]) -> Any:
        """Runs `function` on the engine thread between steps; returns its result."""
        done: concurrent.futures.Future = concurrent.futures.Future()
        self._submit(function, done)
        return done.result()

    def _run(self) -> None:
        try:
            while True:
                with self._wakeup:
                    while not (self._closed or self._commands or self._has_work()):
                        self._wakeup.wait()
                    commands, self._commands = self._commands, []
                for command, done in commands:
                    _run_command(command, done)
                if self._closed:
                    return
                if self._has_work():
                    for output in self._engine.step():
                        if output.finished:
                            prompt = len(output.prompt_token_ids)
                            self.prefill_counts.add(
                                prompt, prompt - (output.num_cached_tokens or 0)
                            )
                            self._deliver(output.request_id, _completion(output))
        except BaseException as error:  # every waiter, and every later caller, learns why
            logger.exception("vLLM engine thread failed")
            self._fail_all(error)

    def _has_work(self) -> bool:
        return self._engine.has_unfinished_requests()

    def _deliver(self, request_id: str, outcome: Completion | BaseException) -> None:
        waiter = self._waiters.pop(request_id, None)
        if waiter is None:  # cancelled
            return
        loop, future = waiter
        try:
            loop.call_soon_threadsafe(_settle, future, outcome)
        except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
            pass

    def _fail_all(self, error: BaseException) -> None:
        with self._wakeup:
            self._failure = error
            commands, self._commands = self._commands, []
        failure = EngineFailed(
            f"the vLLM engine failed: {error!r}; the sampler cannot continue (build a new one)"
        )
        failure.__cause__ = error
        for request_id in list(self._waiters):
            self._deliver(request_id, failure)
        for _, done in commands:  # control calls waiting on the thread get the error too
            if done is not None:
                done.set_exception(failure)

    # -- weights and memory ------------------------------------------------------------------

    def sync_weights(self, params: Any) -> None:
        """Makes the next `generate` calls sample from `params` (a `Qwen3ForCausalLM`, or the
        trainer's `nnx.State` of `nnx.Param`s, sharded as it trains). A collective when several
        JAX processes share the engine. Records seconds and bytes in `last_sync`."""
        state = nnx.state(params, nnx.Param) if isinstance(params, nnx.Module) else params
        started = time.perf_counter()
        if self.owns_engine:

            def torch_weights() -> Iterator[tuple[str, Any]]:
                return ((name, jax_to_torch(a)) for name, a in self._extractor.stream(state))

            self._call(lambda: self._sync_on_engine_thread(torch_weights))
            gc.collect()  # vLLM's reload bookkeeping keeps the last layers' arrays in cycles
        else:  # take part in the collective extraction, keep nothing
            for _ in self._extractor.stream(state):
                pass
        self.last_sync = {
            "seconds": time.perf_counter() - started,
            "bytes": float(self._extractor.hf_bytes() if self.owns_engine else 0),
            "peak_local_bytes": float(self._extractor.peak_local_bytes),
        }

    def _sync_on_engine_thread(self, weights: Callable[[], Iterator[tuple[str, Any]]]) -> None:
        if self._asleep and self.sleep_enabled:
            self._llm.wake_up(tags=["weights"])
        self._pusher.push(weights)
        if self._asleep and self.sleep_enabled:
            self._llm.wake_up(tags=["kv_cache"])
        self._asleep = False
        if not self._llm.reset_prefix_cache(reset_running_requests=True):
            raise RuntimeError("vLLM refused to reset its prefix cache after a weight sync")
        self._synced = True

    def sleep(self) -> None:
        """Frees the engine's GPU memory while the trainer steps (weights and KV cache dropped;
        the next `sync_weights` brings both back). A no-op without sleep mode (CPU)."""
        if not self.owns_engine or not self.sleep_enabled:
            return

        def sleep() -> None:
            if self._engine.has_unfinished_requests():
                raise RuntimeError("VLLMSampler.sleep with requests in flight; await them first")
            self._llm.sleep(level=2)
            self._asleep = True

        self._call(sleep)

    def wake(self) -> None:
        """Allocates the engine's memory again without new weights; with sleep level 2 (what
        `sleep` uses) `generate` still waits for `sync_weights`. A no-op without sleep mode."""
        if not self.owns_engine or not self.sleep_enabled or not self._asleep:
            return

        def wake() -> None:
            self._llm.wake_up()
            self._synced = False
            self._asleep = False

        self._call(wake)

    def close(self) -> None:
        """Stops the engine thread; requests still in flight fail with RuntimeError."""
        if not self.owns_engine or self._closed:
            self._closed = True
            return
        with self._wakeup:
            self._closed = True
            self._wakeup.notify()
        self._thread.join()
        for request_id in list(self._waiters):
            self._deliver(request_id, RuntimeError("VLLMSampler closed before the request ended"))
        self._config_dir.cleanup()


def _connect_all_devices() -> None:
    """One collective over every device of every process, before the engine starts. It sets up
    the communicator the weight extraction uses (the trainer's mesh spans every device): set up
    later, its first use would time out (gloo: after 30 s) waiting for an owner that is still
    starting its engine, whereas a waiting collective on a set-up communicator does not."""
    mesh = Mesh(np.array(jax.devices()), ("devices",))
    spread = jax.make_array_from_callback(
        (mesh.size,), NamedSharding(mesh, PartitionSpec("devices")), lambda index: np.zeros(1)
    )
    gather = jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, PartitionSpec()))
    jax.block_until_ready(gather(spread))


def _completion(output) -> Completion:
    sample = output.outputs[0]
    token_ids = tuple(sample.token_ids)
    logprobs = tuple(
        float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs, strict=True)
    )
    finish_reason = "stop" if sample.finish_reason == "stop" else "length"
    return Completion(token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)


def _run_command(command: Callable[[], Any], done: concurrent.futures.Future | None) -> None:
    """Runs a queued command; a control call's own error goes back to its caller, an error of
    a request command (adding, aborting) propagates and fails the engine."""
    if done is None:
        command()
        return
    try:
        done.set_result(command())
    except Exception as error:
        done.set_exception(error)


def _settle(future: asyncio.Future, outcome: Completion | BaseException) -> None:
    if future.done():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
