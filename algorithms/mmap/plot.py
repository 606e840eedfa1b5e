"""Draw a memory mapping as time x offset rectangles, one colour per tensor (the paper's Figures 1 and 8)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)
from matplotlib.collections import PatchCollection  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from algorithms.mmap.problem import Problem  # noqa: E402


def plot_mapping(problem: Problem, records: list[dict], title: str, out: str) -> None:
    """Save a PNG: x = logical time, y = offset in fast memory; reused allocations are drawn by their owner."""
    figure, axes = plt.subplots(figsize=(12, 6), dpi=120)
    palette = plt.get_cmap("tab20")
    megabyte = 1 << 20
    rectangles, colours = [], []
    for record in records:
        if record["offset"] is None or record["reuses"] is not None:
            continue
        rectangles.append(Rectangle((record["start"] - 0.5, record["offset"] / megabyte),
                                    record["end"] - record["start"] + 1, record["size"] / megabyte))
        colours.append(palette(hash(record["tensor_id"]) % 20))
    axes.add_collection(PatchCollection(rectangles, facecolors=colours, edgecolors="black", linewidths=0.2))
    axes.axhline(problem.fast_memory_bytes / megabyte, color="red", linewidth=1, linestyle="--",
                 label="fast memory size")
    axes.set_xlim(-0.5, problem.num_instructions - 0.5)
    axes.set_ylim(0, problem.fast_memory_bytes / megabyte * 1.05)
    axes.set_xlabel("logical time (instruction)")
    axes.set_ylabel("offset in fast memory (MiB)")
    placed = sum(1 for record in records if record["offset"] is not None)
    axes.set_title(f"{title}: {placed}/{len(records)} buffers in fast memory")
    axes.legend(loc="upper right")
    figure.tight_layout()
    figure.savefig(out)
    plt.close(figure)


def plot_curves(reports: list, out: str) -> None:
    """The learning agents' curves (`AgentScore.curve`: per round, its seconds and mean return as a fraction of
    the best saving), one panel per workload, ES's reward as a dotted line."""
    learned = [r for r in reports if any(s.curve for s in r.scores.values())]
    figure, axes = plt.subplots(1, max(len(learned), 1), figsize=(4 * max(len(learned), 1), 3.5), squeeze=False)
    for axis, report in zip(axes[0], learned):
        for agent, score in report.scores.items():
            if score.curve:
                axis.plot([c["seconds"] for c in score.curve], [c["mean"] for c in score.curve], label=agent)
        if "es" in report.scores:
            axis.axhline(report.scores["es"].reward / max(report.best_saving, 1e-12), color="gray", linestyle=":",
                         label="es (best game)")
        axis.set_title(report.name, fontsize=9)
        axis.set_xlabel("seconds")
        axis.set_ylabel("mean return / best saving")
        axis.legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
