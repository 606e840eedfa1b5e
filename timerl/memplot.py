"""`timerl plot-memory`: an executable's memory timeline drawn next to the loop program that produced it."""

from __future__ import annotations

from typing import Any

from timerl.errors import TimeRLError


def plot_memory(executable: Any, path: str, title: str = "") -> str:
    """Draw device and host bytes over the run of ``executable`` (after ``execute()``) into a PNG at ``path``,
    with the printed schedule beside it. Returns ``path``."""
    timeline = executable.stats.get("memory_timeline")
    if timeline is None:
        raise TimeRLError("plot_memory needs an executable of the torch or jax backend that has run "
                          "(call exe.execute() first)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (curve, text) = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [3, 2]})
    steps = [k * timeline.stride for k in range(len(timeline.device))]
    curve.plot(steps, [b / 1024 for b in timeline.device], label="device", color="tab:blue")
    if any(timeline.host):
        curve.plot(steps, [b / 1024 for b in timeline.host], label="host (swapped)", color="tab:orange")
    budget = executable.device_memory
    if budget is not None:
        curve.axhline(budget / 1024, color="tab:red", linestyle="--", label="device_memory")
    curve.set_xlabel("store and free events, in schedule order")
    curve.set_ylabel("KiB")
    curve.set_title(title or f"peak device {executable.stats['peak_device_bytes'] / 1024:.1f} KiB")
    curve.legend()
    lines = _collapse_constants(str(executable.schedule).splitlines())
    shown = lines[:48] + ([f"... ({len(lines) - 48} more lines)"] if len(lines) > 48 else [])
    text.axis("off")
    text.text(0, 1, "\n".join(shown), family="monospace", fontsize=6, va="top", transform=text.transAxes,
              clip_on=True)
    figure.subplots_adjust(left=0.06, right=0.99, bottom=0.1, top=0.92, wspace=0.05)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _collapse_constants(lines: list[str]) -> list[str]:
    """Runs of zero-dimensional constant statements (dozens in a training program) shown as one line."""
    result: list[str] = []
    run = 0
    for line in lines + [""]:
        stripped = line.strip()
        if stripped.startswith("const") and stripped.endswith("[]"):
            run += 1
            continue
        if run:
            indent = line[:len(line) - len(line.lstrip())] if stripped else ""
            result.append(f"{indent}({run} constant statement{'s' if run > 1 else ''})")
            run = 0
        if line:
            result.append(line)
    return result
