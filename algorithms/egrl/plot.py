"""The bench's pictures: learning curves (speedup over the compiler against evaluations, mean over seeds) and the
best mapping (the paper's Fig. 6: per layer, the level of its weights and of its activation)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402

from algorithms.egrl.chip import LEVELS  # noqa: E402


def plot_curves(curves: dict[str, list[list[tuple[int, float]]]], budget: int, title: str, out: str) -> None:
    """``curves[method]``: one (evaluations, best speedup) list per seed; drawn as mean and ±1 std band."""
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    grid = np.linspace(1, budget, 200)
    for method, runs in curves.items():
        sampled = []
        for run in runs:
            if not run:
                continue
            steps, values = np.array(run, dtype=np.float64).T
            sampled.append(np.interp(grid, steps, values, left=0.0))
        if not sampled:
            continue
        sampled = np.array(sampled)
        mean, std = sampled.mean(axis=0), sampled.std(axis=0)
        axes.plot(grid, mean, label=method)
        axes.fill_between(grid, mean - std, mean + std, alpha=0.2)
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="compiler")
    axes.set_xlabel("simulator evaluations")
    axes.set_ylabel("speedup over the compiler (best so far)")
    axes.set_title(title)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def plot_mapping(mapping: np.ndarray, baseline: np.ndarray, names: tuple[str, ...], title: str, out: str) -> None:
    """Rows: weights and activations of the best mapping, then of the compiler's; columns: layers in order."""
    figure, axes = plt.subplots(figsize=(max(8, len(names) * 0.06), 3), dpi=120)
    rows = np.stack([mapping[:, 0], mapping[:, 1], baseline[:, 0], baseline[:, 1]])
    image = axes.imshow(rows, aspect="auto", cmap=ListedColormap(["#d9d9d9", "#6baed6", "#08306b"]), vmin=-0.5,
                        vmax=2.5, interpolation="nearest")
    axes.set_yticks(range(4), ["weights (best)", "activations (best)", "weights (compiler)",
                               "activations (compiler)"])
    axes.set_xlabel("layer (topological order)")
    axes.set_title(title)
    colorbar = figure.colorbar(image, ticks=range(3))
    colorbar.ax.set_yticklabels(LEVELS)
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def plot_ceilings(dram: np.ndarray, ceilings: dict[str, list[float]], chosen: float, out: str) -> None:
    """The largest speedup over the compiler any mapping can reach (`ceiling`), against the DRAM bandwidth."""
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=120)
    for name, values in ceilings.items():
        axes.plot(dram / 1e9, values, marker="o", label=name)
    axes.axvline(chosen / 1e9, color="grey", linestyle=":", label="the simulator's DRAM bandwidth")
    axes.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("DRAM bandwidth, GB/s (LLC x10, SRAM x100; 50 int8 TOPS)")
    axes.set_ylabel("speedup ceiling over the compiler (LP bound)")
    axes.set_title("How much better than the compiler any mapping can be")
    axes.legend()
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)
