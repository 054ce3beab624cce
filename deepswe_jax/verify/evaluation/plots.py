"""curves.png: pass@k (and Best@k of each selector) against k, or several evaluations' curves
side by side (bench/sft_rl_curves.py); and a metric against the training iteration of several
runs (bench/sft_rl_curves.py's reward curves of GRPO++ and its control)."""

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
    all_ks = sorted({k for curve in curves.values() for k in curve})

    def axes_style(axes) -> None:
        axes.set_xscale("log", base=2)
        axes.set_xticks(all_ks, [str(k) for k in all_ks])
        axes.set_ylim(0, 100)

    percent = {label: {k: 100 * v for k, v in curve.items()} for label, curve in curves.items()}
    _save_lines(
        path,
        percent,
        xlabel="k (candidates per task)",
        ylabel="% resolved",
        title=title,
        style=axes_style,
        marker_size=6,
    )


def plot_series(
    path: str | os.PathLike,
    series: Mapping[str, Mapping[int, float]],
    *,
    xlabel: str,
    ylabel: str,
    title: str = "",
) -> None:
    """A PNG of each {x: y} line of `series` (by label) on linear axes, e.g. the training reward
    of several runs against the iteration."""
    _save_lines(path, series, xlabel=xlabel, ylabel=ylabel, title=title, marker_size=3)


def _save_lines(path, lines, *, xlabel, ylabel, title, marker_size, style=None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for label, line in lines.items():
        xs = sorted(line)
        axes.plot(xs, [line[x] for x in xs], marker="o", markersize=marker_size, label=label)
    if style is not None:
        style(axes)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(alpha=0.3)
    axes.legend()
    if title:
        axes.set_title(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
