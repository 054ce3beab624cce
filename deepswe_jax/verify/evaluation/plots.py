"""curves.png: pass@k (and Best@k of each selector) against k, or several evaluations' curves
side by side (bench/sft_rl_curves.py)."""

from __future__ import annotations

import os
from collections.abc import Mapping

CURVES_FILE = "curves.png"


def labelled_curves(
    pass_at_k: Mapping[int, float], best_at_k: Mapping[str, Mapping[int, float]]
) -> dict[str, Mapping[int, float]]:
    """{'pass@k': pass_at_k, 'Best@k (<selector>)': curve, ...}: the curves `plot_curves` draws."""
    return {"pass@k": pass_at_k, **{f"Best@k ({name})": c for name, c in best_at_k.items()}}


def plot_curves(
    path: str | os.PathLike,
    curves: Mapping[str, Mapping[int, float]],
    *,
    title: str = "",
) -> None:
    """A PNG of each {k: fraction resolved} curve of `curves` (by label) against k (log2 x
    axis), e.g. `labelled_curves(...)`, or several evaluations' with their names in the labels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, curve in curves.items():
        ks = sorted(curve)
        axes.plot(ks, [100 * curve[k] for k in ks], marker="o", label=label)
    all_ks = sorted({k for curve in curves.values() for k in curve})
    axes.set_xscale("log", base=2)
    axes.set_xticks(all_ks, [str(k) for k in all_ks])
    axes.set_xlabel("k (candidates per task)")
    axes.set_ylabel("% resolved")
    axes.set_ylim(0, 100)
    axes.grid(alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
