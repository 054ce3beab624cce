"""Hugging Face safetensors <-> Qwen3ForCausalLM, one tensor at a time.

HF stores ``nn.Linear`` weights as [out, in]; this model stores einsum layouts [in, *out]
(e.g. q_proj [e, h, d]) with all layers stacked on a leading axis. ``HF_LAYER_NAMES`` and
``_to_model_layout`` / ``to_hf_layout`` are the single place that mapping lives.

Loading never holds the whole model on the host: each HF tensor is read (memory-mapped) on its
own, converted, and placed with its target sharding via ``jax.make_array_from_callback``; a
layer's tensor is then written into its slot of the stacked, already-sharded parameter by a
donated in-place update.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding
from safetensors import safe_open
from safetensors.numpy import save_file

from deepswe_jax.model.config import Qwen3Config
from deepswe_jax.model.qwen3 import LAYER_PARAM_AXES, Qwen3ForCausalLM, RematPolicy
from deepswe_jax.parallel.sharding import Rules, logical_to_sharding, variable_logical_axes

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

# Per-layer parameter -> HF tensor name under "model.layers.{i}.".
HF_LAYER_NAMES: dict[str, str] = {
    "input_layernorm": "input_layernorm.weight",
    "q_proj": "self_attn.q_proj.weight",
    "k_proj": "self_attn.k_proj.weight",
    "v_proj": "self_attn.v_proj.weight",
    "q_norm": "self_attn.q_norm.weight",
    "k_norm": "self_attn.k_norm.weight",
    "o_proj": "self_attn.o_proj.weight",
    "post_attention_layernorm": "post_attention_layernorm.weight",
    "gate_proj": "mlp.gate_proj.weight",
    "up_proj": "mlp.up_proj.weight",
    "down_proj": "mlp.down_proj.weight",
}
EMBED_NAME = "model.embed_tokens.weight"
FINAL_NORM_NAME = "model.norm.weight"
LM_HEAD_NAME = "lm_head.weight"
# Parameters stored as HF Linear weights ([out, in], transposed here); the rest keep HF layout.
LINEAR_PARAMS = frozenset(
    {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head"}
)


def hf_layer_name(layer: int, param: str) -> str:
    return f"model.layers.{layer}.{HF_LAYER_NAMES[param]}"


def hf_shapes(config: Qwen3Config) -> dict[str, tuple[int, ...]]:
    """Every HF tensor name of a checkpoint for ``config`` -> its HF shape, in file order."""
    c = config
    e, m, v = c.hidden_size, c.intermediate_size, c.vocab_size
    q, kv = c.num_attention_heads * c.head_dim, c.num_key_value_heads * c.head_dim
    per_layer = {
        "input_layernorm": (e,),
        "q_proj": (q, e),
        "k_proj": (kv, e),
        "v_proj": (kv, e),
        "q_norm": (c.head_dim,),
        "k_norm": (c.head_dim,),
        "o_proj": (e, q),
        "post_attention_layernorm": (e,),
        "gate_proj": (m, e),
        "up_proj": (m, e),
        "down_proj": (e, m),
    }
    shapes = {EMBED_NAME: (v, e)}
    for layer in range(c.num_hidden_layers):
        for param, shape in per_layer.items():
            shapes[hf_layer_name(layer, param)] = shape
    shapes[FINAL_NORM_NAME] = (e,)
    if not c.tie_word_embeddings:
        shapes[LM_HEAD_NAME] = (v, e)
    return shapes


def _to_model_layout(param: str, hf_tensor: Any, model_shape: tuple[int, ...]) -> Any:
    """HF tensor -> this model's layout for one layer (or a top-level parameter)."""
    if param in LINEAR_PARAMS:
        return hf_tensor.T.reshape(model_shape)
    return hf_tensor.reshape(model_shape)


def to_hf_layout(param: str, tensor: Any, hf_shape: tuple[int, ...]) -> Any:
    """This model's layout for one layer (or a top-level parameter) -> HF tensor of `hf_shape`
    (traceable: inference engines' weight sync extracts layers with it inside `jax.jit`)."""
    if param in LINEAR_PARAMS:
        return tensor.reshape(hf_shape[1], hf_shape[0]).T
    return tensor.reshape(hf_shape)


class _SafetensorsReader:
    """Reads single tensors from a single-file or sharded (indexed) HF safetensors checkpoint."""

    def __init__(self, directory: str):
        self.directory = directory
        index_path = os.path.join(directory, INDEX_FILE)
        single_path = os.path.join(directory, SINGLE_FILE)
        if os.path.exists(index_path):
            with open(index_path) as f:
                self.weight_map: dict[str, str] = json.load(f)["weight_map"]
            for filename in sorted(set(self.weight_map.values())):
                if not os.path.exists(os.path.join(directory, filename)):
                    raise FileNotFoundError(
                        f"{os.path.join(directory, filename)} not found but listed in {index_path} "
                        "(e.g. for tensor "
                        f"{next(n for n, f in self.weight_map.items() if f == filename)}); "
                        "the download is incomplete: fetch every shard again"
                    )
        elif os.path.exists(single_path):
            with safe_open(single_path, "np") as f:
                self.weight_map = dict.fromkeys(f.keys(), SINGLE_FILE)
        else:
            raise FileNotFoundError(
                f"no {SINGLE_FILE} or {INDEX_FILE} in {directory}; expected an HF model directory "
                "with safetensors weights (convert .bin checkpoints with transformers first)"
            )
        self._open: dict[str, Any] = {}

    def file_of(self, name: str) -> str:
        return os.path.join(self.directory, self.weight_map[name])

    def read(self, name: str, expected_shape: tuple[int, ...]) -> np.ndarray:
        """The tensor ``name`` as a numpy array; checks it exists and has ``expected_shape``."""
        if name not in self.weight_map:
            raise KeyError(
                f"tensor {name} missing from the checkpoint in {self.directory}; the weights do "
                "not match config.json"
            )
        filename = self.weight_map[name]
        if filename not in self._open:
            self._open[filename] = safe_open(os.path.join(self.directory, filename), "np")
        handle = self._open[filename]
        shape = tuple(handle.get_slice(name).get_shape())
        if shape != expected_shape:
            raise ValueError(
                f"{self.file_of(name)}: tensor {name} has shape {shape}, but config.json implies "
                f"{expected_shape}; the weights do not belong to this config"
            )
        return handle.get_tensor(name)

    def close(self) -> None:
        for handle in self._open.values():
            handle.__exit__(None, None, None)
        self._open.clear()


def _place(host: np.ndarray, sharding: jax.sharding.Sharding, dtype: jnp.dtype) -> jax.Array:
    """Put a host array on devices with ``sharding``; each device copies only its own slice."""
    host = host.astype(dtype, copy=False)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def _write_layer(stacked: jax.Array, layer_value: jax.Array, layer: jax.Array) -> jax.Array:
    return stacked.at[layer].set(layer_value)


def _drop_leading_axis(sharding: jax.sharding.Sharding) -> jax.sharding.Sharding:
    if isinstance(sharding, NamedSharding):
        spec = tuple(sharding.spec)[1:]
        return NamedSharding(sharding.mesh, PartitionSpec(*spec))
    return sharding


def load_hf_checkpoint(
    path: str | os.PathLike,
    dtype: jnp.dtype = jnp.float32,
    mesh: Mesh | None = None,
    rules: Rules | None = None,
    *,
    compute_dtype: jnp.dtype | None = None,
    remat: RematPolicy = "none",
    attention_impl: str = "xla",
) -> Qwen3ForCausalLM:
    """Load an HF Qwen3 directory (config.json + single or sharded safetensors).

    Args:
      path: the HF model directory.
      dtype: parameter (storage) dtype; tensors are cast on the host one at a time.
      mesh: place every parameter with its NamedSharding on this mesh (None: default device).
      rules: logical->mesh rules (default: the active rules, ``DEFAULT_RULES``).
      compute_dtype: activation dtype of the returned model (default ``dtype``).
      remat, attention_impl: passed to ``Qwen3ForCausalLM``.

    Raises:
      ValueError: config.json of another architecture, a tensor of the wrong shape, unknown
        tensors; FileNotFoundError / KeyError: a missing file or tensor. Messages name both.
    """
    directory = os.fspath(path)
    config = Qwen3Config.from_json_file(directory)
    reader = _SafetensorsReader(directory)
    expected = hf_shapes(config)
    ignorable = {LM_HEAD_NAME} if config.tie_word_embeddings else set()
    unknown = sorted(set(reader.weight_map) - set(expected) - ignorable)
    if unknown:
        raise ValueError(
            f"{directory}: tensors {unknown[:5]}{' ...' if len(unknown) > 5 else ''} are not part "
            f"of a Qwen3 model with this config.json ({len(unknown)} unknown)"
        )

    abstract = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(
            config,
            rngs=nnx.Rngs(0),
            param_dtype=dtype,
            dtype=compute_dtype or dtype,
            remat=remat,
            attention_impl=attention_impl,
        )
    )
    graphdef, state = nnx.split(abstract)
    default_sharding = SingleDeviceSharding(jax.devices()[0])

    def sharding_of(variable: nnx.Variable) -> jax.sharding.Sharding:
        if mesh is None:
            return default_sharding
        shape = variable.get_value().shape
        return logical_to_sharding(variable_logical_axes(variable), mesh, rules, shape)

    def load_top_level(variable: nnx.Variable, hf_name: str, param: str) -> None:
        host = reader.read(hf_name, expected[hf_name])
        model_shape = variable.get_value().shape
        value = _place(_to_model_layout(param, host, model_shape), sharding_of(variable), dtype)
        variable.set_value(value)

    try:
        load_top_level(state["embed_tokens"], EMBED_NAME, "embed_tokens")
        load_top_level(state["norm"], FINAL_NORM_NAME, "norm")
        if not config.tie_word_embeddings:
            load_top_level(state["lm_head"], LM_HEAD_NAME, "lm_head")

        for param in LAYER_PARAM_AXES:
            variable = state["layers"][param]
            stacked_shape = variable.get_value().shape
            stacked_sharding = sharding_of(variable)
            layer_sharding = _drop_leading_axis(stacked_sharding)
            stacked = jax.jit(
                lambda shape=stacked_shape: jnp.zeros(shape, dtype), out_shardings=stacked_sharding
            )()
            write = jax.jit(_write_layer, donate_argnums=0, out_shardings=stacked_sharding)
            for layer in range(config.num_hidden_layers):
                hf_name = hf_layer_name(layer, param)
                host = reader.read(hf_name, expected[hf_name])
                layer_value = _place(
                    _to_model_layout(param, host, stacked_shape[1:]), layer_sharding, dtype
                )
                stacked = write(stacked, layer_value, jnp.int32(layer))
            variable.set_value(stacked)
    finally:
        reader.close()
    return nnx.merge(graphdef, state)


def _gather_to_host(x: jax.Array) -> np.ndarray:
    if x.is_fully_addressable:
        return np.asarray(jax.device_get(x))
    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def hf_tensor_stream(
    model: Qwen3ForCausalLM, *, dtype: jnp.dtype | None = None, to_host: bool = True
) -> Iterator[tuple[str, np.ndarray | jax.Array]]:
    """Yield (HF name, tensor in HF layout) for every weight, one tensor at a time, in file order.

    ``to_host=False`` yields jax arrays (converted on device; useful for pushing weights into an
    in-process vLLM engine); otherwise numpy arrays. ``dtype`` casts (default: param dtype). In a
    multi-host job every process must iterate the stream (host transfer is a collective).
    """
    config = model.config
    shapes = hf_shapes(config)

    def emit(param: str, value: jax.Array, hf_name: str) -> tuple[str, Any]:
        if dtype is not None:
            value = value.astype(dtype)
        hf_value = to_hf_layout(param, value, shapes[hf_name])
        return hf_name, (_gather_to_host(hf_value) if to_host else hf_value)

    yield emit("embed_tokens", model.embed_tokens[...], EMBED_NAME)
    stacked = model.layers.stacked_params()
    for layer in range(config.num_hidden_layers):
        for param in HF_LAYER_NAMES:
            yield emit(param, stacked[param][layer], hf_layer_name(layer, param))
    yield emit("norm", model.norm[...], FINAL_NORM_NAME)
    if not config.tie_word_embeddings:
        yield emit("lm_head", model.lm_head[...], LM_HEAD_NAME)


def _shard_plan(sizes: dict[str, int], max_shard_bytes: int) -> list[list[str]]:
    """Group tensor names (in order) into shards of at most ``max_shard_bytes`` (a tensor larger
    than the limit gets a shard of its own)."""
    shards: list[list[str]] = [[]]
    filled = 0
    for name, size in sizes.items():
        if shards[-1] and filled + size > max_shard_bytes:
            shards.append([])
            filled = 0
        shards[-1].append(name)
        filled += size
    return shards


def save_hf_checkpoint(
    model: Qwen3ForCausalLM,
    path: str | os.PathLike,
    max_shard_bytes: int = 5 * 1024**3,
    *,
    dtype: jnp.dtype | None = None,
) -> None:
    """Write config.json, generation_config.json and safetensors (sharded with an index when the
    weights exceed ``max_shard_bytes``), loadable by ``transformers.AutoModelForCausalLM``.

    Tensors stream through host memory one shard at a time. ``dtype`` defaults to the model's
    param dtype. In a multi-host job call it on every process; only process 0 writes.
    """
    directory = os.fspath(path)
    config = model.config
    out_dtype = np.dtype(dtype or model.param_dtype)
    writer = jax.process_index() == 0
    if writer:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "config.json"), "w") as f:
            json.dump(config.to_hf_dict(dtype=out_dtype.name), f, indent=2)
        generation = {
            key: value
            for key, value in config.to_hf_dict().items()
            if key in ("bos_token_id", "eos_token_id", "pad_token_id") and value is not None
        }
        with open(os.path.join(directory, "generation_config.json"), "w") as f:
            json.dump(generation, f, indent=2)

    sizes = {
        name: int(np.prod(shape)) * out_dtype.itemsize for name, shape in hf_shapes(config).items()
    }
    shards = _shard_plan(sizes, max_shard_bytes)
    if len(shards) == 1:
        filenames = [SINGLE_FILE]
    else:
        filenames = [
            f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))
        ]
    file_of = {name: filenames[i] for i, names in enumerate(shards) for name in names}

    last_of_shard = {names[-1]: filenames[i] for i, names in enumerate(shards)}
    pending: dict[str, np.ndarray] = {}
    for name, tensor in hf_tensor_stream(model, dtype=out_dtype):
        pending[name] = np.ascontiguousarray(tensor)
        if name in last_of_shard:
            if writer:
                save_file(
                    pending, os.path.join(directory, last_of_shard[name]), metadata={"format": "pt"}
                )
            pending = {}

    if writer and len(shards) > 1:
        index = {"metadata": {"total_size": sum(sizes.values())}, "weight_map": file_of}
        with open(os.path.join(directory, INDEX_FILE), "w") as f:
            json.dump(index, f, indent=2)
