"""vLLM sampler (GPU), colocated with the JAX trainer on the same devices.

The engine runs in this process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) with sleep mode, as in verl:
`sleep()` frees its weights and KV cache while the trainer steps; `sync_weights` wakes the weight
memory, pushes the JAX weights bucket by bucket as `(hf_name, torch tensor)` pairs (DLPack, no trip
through disk; vLLM's `load_weights` fuses q/k/v and gate/up itself), wakes the KV cache and resets
the prefix cache, so cached prefixes never mix old and new weights. The engine starts with dummy
weights (`load_format='dummy'`: `hf_dir` needs only config.json and the tokenizer) and `generate`
refuses to run before the first `sync_weights`, so step 0 never samples stale weights.

Concurrent `generate` callers are batched continuously: one thread drives `LLMEngine.step()`, new
requests join between steps. vLLM is imported lazily; the rest of the package does not need it.

Logprobs: vLLM's default `raw_logprobs` are log_softmax of the unscaled logits, which equal
`JaxSampler`'s temperature-scaled logprobs at temperature 1 (the RL setting).
"""

import asyncio
import itertools
import os
import threading
from collections.abc import Sequence
from typing import Any

import jax.numpy as jnp
from flax import nnx

from deepswe_jax.model import Qwen3ForCausalLM, hf_tensor_stream
from deepswe_jax.sampling.base import Completion, GenerateRequest, SamplingParams
from deepswe_jax.sampling.weight_stream import DEFAULT_BUCKET_BYTES, torch_weight_buckets


def _import_vllm():
    try:
        import vllm
    except ImportError as error:
        raise ImportError(
            "VLLMSampler needs vLLM on a GPU host: `pip install -e '.[vllm]'`, "
            "or use config.sampler.kind='jax' (the embedded JaxSampler)."
        ) from error
    return vllm


def _load_weights_on_worker(worker, bucket: list[tuple[str, Any]]) -> None:
    """Runs inside vLLM's worker: HF-named tensors into the model (loader fuses qkv, gate/up)."""
    worker.model_runner.model.load_weights(weights=bucket)


class VLLMSampler:
    """`Sampler` backed by an in-process vLLM engine with sleep mode.

    Args:
      model: the JAX policy (its structure turns a synced `nnx.State` back into HF tensors).
      hf_dir: directory with the policy's HF config.json and tokenizer (weights not read).
      max_model_len: longest prompt + completion in tokens.
      dtype: dtype of the engine's weights and of the pushed tensors.
      gpu_memory_utilization: fraction of GPU memory vLLM may take when awake.
      max_bucket_bytes: bytes of weights pushed per `load_weights` call.
      engine_kwargs: further `vllm.EngineArgs` fields (tensor_parallel_size, seed, ...).
    """

    def __init__(
        self,
        model: Qwen3ForCausalLM,
        hf_dir: str,
        *,
        max_model_len: int,
        dtype: jnp.dtype = jnp.bfloat16,
        gpu_memory_utilization: float = 0.5,
        max_bucket_bytes: int = DEFAULT_BUCKET_BYTES,
        **engine_kwargs: Any,
    ):
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        vllm = _import_vllm()
        self._vllm = vllm
        self._graphdef = nnx.graphdef(model)
        self._dtype = jnp.dtype(dtype)
        self._llm = vllm.LLM(
            model=hf_dir,
            max_model_len=max_model_len,
            dtype=self._dtype.name,
            load_format="dummy",
            gpu_memory_utilization=gpu_memory_utilization,
            enable_sleep_mode=True,
            enable_prefix_caching=True,
            **engine_kwargs,
        )
        self._engine = self._llm.llm_engine
        self._max_bucket_bytes = max_bucket_bytes
        self._request_ids = itertools.count()
        self._waiters: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}
        self._lock = threading.Condition()
        self._sleeping = False
        self._synced = False
        self._closed = False
        self._thread = threading.Thread(target=self._run_engine, name="vllm-sampler", daemon=True)
        self._thread.start()

    def _vllm_params(self, params: SamplingParams):
        return self._vllm.SamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_new_tokens,
            stop_token_ids=list(params.stop_token_ids),
            ignore_eos=True,  # stop exactly on the caller's stop_token_ids, as JaxSampler does
            logprobs=0,  # the sampled token's logprob only
            detokenize=False,
        )

    async def generate(self, requests: Sequence[GenerateRequest]) -> list[Completion]:
        """Completions for `requests`, in order; batched with every other concurrent caller."""
        loop = asyncio.get_running_loop()
        futures = []
        with self._lock:
            if self._closed:
                raise RuntimeError("VLLMSampler is closed; build a new one.")
            if self._sleeping or not self._synced:
                raise RuntimeError(
                    "VLLMSampler has no current weights (asleep, or never synced); call "
                    "sync_weights(params) before generate"
                )
            for request in requests:
                request_id = str(next(self._request_ids))
                future = loop.create_future()
                self._waiters[request_id] = (loop, future)
                self._engine.add_request(
                    request_id,
                    {"prompt_token_ids": list(request.prompt_ids)},
                    self._vllm_params(request.params),
                )
                futures.append(future)
            self._lock.notify()
        return list(await asyncio.gather(*futures))

    def _run_engine(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._engine.has_unfinished_requests():
                    self._lock.wait()
                if self._closed:
                    return
                outputs = self._engine.step()
            for output in outputs:
                if output.finished:
                    loop, future = self._waiters.pop(output.request_id)
                    loop.call_soon_threadsafe(_resolve, future, _completion(output))

    def sync_weights(self, params: Any) -> None:
        """Pushes `params` (a `Qwen3ForCausalLM` or its `nnx.State`) into the engine.

        Wakes a sleeping engine, loads HF-named tensors bucket by bucket, resets the prefix cache.
        """
        model = params if isinstance(params, nnx.Module) else nnx.merge(self._graphdef, params)
        named_tensors = hf_tensor_stream(model, dtype=self._dtype, to_host=False)
        with self._lock:
            if self._sleeping:
                self._llm.wake_up(tags=["weights"])
            for bucket in torch_weight_buckets(
                named_tensors, max_bucket_bytes=self._max_bucket_bytes
            ):
                self._llm.collective_rpc(_load_weights_on_worker, args=(bucket,))
            if self._sleeping:
                self._llm.wake_up(tags=["kv_cache"])
                self._sleeping = False
            self._llm.reset_prefix_cache()
            self._synced = True

    def sleep(self) -> None:
        """Frees the engine's GPU memory (weights dropped: `sync_weights` reloads them)."""
        with self._lock:
            if self._engine.has_unfinished_requests():
                raise RuntimeError("VLLMSampler.sleep with requests in flight; await them first.")
            self._llm.sleep(level=2)
            self._sleeping = True

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify()
        self._thread.join()
        for loop, future in self._waiters.values():
            loop.call_soon_threadsafe(_fail, future, RuntimeError("VLLMSampler closed"))
        self._waiters.clear()


def _completion(output) -> Completion:
    sample = output.outputs[0]
    token_ids = tuple(sample.token_ids)
    logprobs = tuple(
        float(step[token].logprob) for token, step in zip(token_ids, sample.logprobs, strict=True)
    )
    finish_reason = "stop" if sample.finish_reason == "stop" else "length"
    return Completion(token_ids=token_ids, logprobs=logprobs, finish_reason=finish_reason)


def _resolve(future: asyncio.Future, value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _fail(future: asyncio.Future, error: BaseException) -> None:
    if not future.done():
        future.set_exception(error)
