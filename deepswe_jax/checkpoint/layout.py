"""Whether a saved checkpoint fits a restore target, read from its metadata alone.

A restore fails for two different reasons: the files are damaged (corruption: skip the step,
fall back to the one before) or the checkpoint holds another model than the one asked for
(mismatch: shapes, dtypes, tree structure, a mesh that cannot hold an array). A mismatch is a
config mistake, not damage, so it is refused (`CheckpointMismatchError`) before anything is
moved or written; `check_fits` tells the two apart before the arrays are read.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from etils import epath

# Differences named in a mismatch message; the rest are counted.
_SHOWN = 3


class CheckpointMismatchError(ValueError):
    """A checkpoint holds arrays of other shapes, dtypes or structure than the restore target
    (another config's model, not a damaged file); nothing was changed on disk."""


def _flat(tree: Any) -> dict[str, Any]:
    """Leaves of a nested dict keyed by their '/'-joined path."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {"/".join(str(getattr(e, "key", e)) for e in path): leaf for path, leaf in leaves}


def saved_layout(item_directory: str | os.PathLike) -> dict[str, Any]:
    """The array metadata (shape, dtype) of a saved pytree item, keyed by path. Raises whatever
    Orbax raises when the metadata cannot be read (a damaged checkpoint)."""
    metadata = ocp.StandardCheckpointHandler().metadata(epath.Path(os.fspath(item_directory)))
    return _flat(metadata.tree if hasattr(metadata, "tree") else metadata)


def layout_differences(
    saved: Mapping[str, Any], target: Mapping[str, Any], *, dtypes: bool = True
) -> list[str]:
    """What keeps `target` (path -> ShapeDtypeStruct) from restoring `saved` (path -> array
    metadata): missing or extra arrays, other shapes, other dtypes (when `dtypes`; Orbax casts
    otherwise), a sharding that cannot split the shape."""
    differences = [f"{path}: not in the checkpoint" for path in sorted(target.keys() - saved)]
    differences += [f"{path}: only in the checkpoint" for path in sorted(saved.keys() - target)]
    for path in sorted(saved.keys() & target.keys()):
        have, want = saved[path], target[path]
        shape, dtype = tuple(have.shape), np.dtype(have.dtype)
        if shape != tuple(want.shape):
            differences.append(f"{path}: saved shape {shape}, now {tuple(want.shape)}")
        elif dtypes and dtype != np.dtype(want.dtype):
            differences.append(f"{path}: saved dtype {dtype.name}, now {np.dtype(want.dtype).name}")
        elif getattr(want, "sharding", None) is not None:
            try:
                want.sharding.shard_shape(shape)
            except ValueError:
                differences.append(f"{path}: shape {shape} does not split over {want.sharding}")
    return differences


def summarize(differences: list[str]) -> str:
    """The first differences, and how many more."""
    shown = "; ".join(differences[:_SHOWN])
    rest = len(differences) - _SHOWN
    return shown + (f"; and {rest} more" if rest > 0 else "")


def check_fits(
    directory: str | os.PathLike, targets: Mapping[str, Any], *, dtypes: bool = True
) -> None:
    """Raises CheckpointMismatchError when a pytree item of the checkpoint `directory` does not
    fit its target (item name -> nested dict of ShapeDtypeStruct); lets the metadata reader's
    error through when an item cannot be read (corruption)."""
    differences = []
    for name, target in targets.items():
        found = layout_differences(
            saved_layout(os.path.join(directory, name)), _flat(target), dtypes=dtypes
        )
        differences += [f"{name}/{difference}" for difference in found]
    if differences:
        raise CheckpointMismatchError(
            f"checkpoint {directory} holds another model than this config's "
            f"({summarize(differences)})"
        )
