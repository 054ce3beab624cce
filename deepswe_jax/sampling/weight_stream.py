"""JAX weights to an inference engine in HF names and layouts, in buckets of bounded size.

The source is `deepswe_jax.model.hf_tensor_stream(model)`: `(hf_name, array)` pairs in exactly the
names, shapes and dtypes `save_hf_checkpoint` writes, so an engine's own HF loader (vLLM's
`load_weights`) fuses q/k/v and gate/up itself. Nothing goes through disk: each array reaches torch
by DLPack, without a copy when it already lives on a single device.
"""

from collections.abc import Iterable, Iterator
from typing import Any

import jax

DEFAULT_BUCKET_BYTES = 2 << 30


def bucket_named_tensors(
    named_tensors: Iterable[tuple[str, Any]], *, max_bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> Iterator[list[tuple[str, Any]]]:
    """Groups `(name, array)` pairs, in order, into lists of at most `max_bucket_bytes` bytes.

    A tensor larger than `max_bucket_bytes` travels alone in its own bucket, so every bucket holds
    at most `max(max_bucket_bytes, largest tensor)` bytes. Arrays need `.nbytes` (JAX, numpy, and
    torch tensors via `nbytes`).
    """
    if max_bucket_bytes <= 0:
        raise ValueError(f"max_bucket_bytes must be positive, got {max_bucket_bytes}")
    bucket: list[tuple[str, Any]] = []
    bucket_bytes = 0
    for name, array in named_tensors:
        size = int(array.nbytes)
        if bucket and bucket_bytes + size > max_bucket_bytes:
            yield bucket
            bucket, bucket_bytes = [], 0
        bucket.append((name, array))
        bucket_bytes += size
    if bucket:
        yield bucket


def jax_to_torch(array: jax.Array):
    """A torch tensor sharing `array`'s buffer (DLPack); a sharded array is first gathered.

    An array spread over several devices has no single buffer to share, so it is gathered onto
    the first of its devices (one copy); a single-device array is shared without a copy.
    """
    import torch

    if len(array.sharding.device_set) > 1:
        first_device = min(array.sharding.device_set, key=lambda d: d.id)
        array = jax.device_put(array, jax.sharding.SingleDeviceSharding(first_device))
    return torch.from_dlpack(array)


def torch_weight_buckets(
    named_tensors: Iterable[tuple[str, jax.Array]], *, max_bucket_bytes: int = DEFAULT_BUCKET_BYTES
) -> Iterator[list[tuple[str, Any]]]:
    """`bucket_named_tensors` of the stream with each array turned into a torch tensor by DLPack.

    Conversion happens bucket by bucket, so at most one bucket of gathered copies is alive at once.
    """
    for bucket in bucket_named_tensors(named_tensors, max_bucket_bytes=max_bucket_bytes):
        yield [(name, jax_to_torch(array)) for name, array in bucket]
