"""The PNGs the evaluation and bench/sft_rl_curves.py draw: pass@k curves and per-iteration series."""

from __future__ import annotations

import matplotlib.image

from deepswe_jax.verify.evaluation.plots import labelled_curves, plot_curves, plot_series


def _pixels(path):
    image = matplotlib.image.imread(path)
    return image.shape, float(image[..., :3].std())


def test_plot_curves_and_plot_series_write_pngs_with_drawn_lines(tmp_path):
    plot_curves(
        tmp_path / "curves.png",
        labelled_curves({1: 0.2, 2: 0.3, 4: 0.5}, {"execution": {1: 0.2, 2: 0.4, 4: 0.6}}),
        title="t",
    )
    plot_series(
        tmp_path / "rewards.png",
        {"GRPO++": {1: 0.25, 2: 0.4, 3: 0.6}, "control (lr 0)": {1: 0.3, 2: 0.25, 3: 0.3}},
        xlabel="GRPO++ iteration",
        ylabel="training reward",
    )
    for name in ("curves.png", "rewards.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        shape, spread = _pixels(tmp_path / name)
        assert shape[:2] == (480, 720)  # 6 x 4 inches at 120 dpi
        assert spread > 0.05  # not a blank canvas


def test_plot_series_draws_one_line_per_run_at_its_values(tmp_path, monkeypatch):
    import matplotlib.axes

    drawn = []
    original = matplotlib.axes.Axes.plot

    def spy(axes, xs, ys, **kwargs):
        drawn.append((kwargs["label"], list(xs), list(ys)))
        return original(axes, xs, ys, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "plot", spy)
    plot_series(tmp_path / "r.png", {"a": {2: 0.5, 1: 0.25}, "b": {1: 0.0}}, xlabel="x", ylabel="y")
    assert drawn == [("a", [1, 2], [0.25, 0.5]), ("b", [1], [0.0])]
