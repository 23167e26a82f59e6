"""The picture of an extrapolation (`tracehouse extrapolate --plot`): measured runs and each
model's throughput, response time and bottleneck utilisation against concurrency.

Owns the drawing only (the numbers are `extrapolate.py`'s). Each model's curve is solid
where it is in range and dotted beyond (PerfExt past 90 % of its maximum throughput,
USL where it is capped at the bottleneck's capacity): the two parts are drawn as separate
lines, so the dotted one is not hidden under the solid one. matplotlib is imported here
only (a few hundred ms), with the Agg backend: no display needed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .extrapolate import Extrapolation

COLORS = {"perfext": "tab:blue", "usl": "tab:green", "mva": "tab:red"}


def _split(ax, grid: np.ndarray, y: np.ndarray, ok: np.ndarray, color: str, label: str) -> None:
    """`y` over `grid`: solid where `ok`, dotted where not (joined at the boundary)."""
    inside = np.where(ok, y, np.nan)
    ax.plot(grid, inside, color=color, label=label)
    if not ok.all():
        # One point of overlap so the dotted part starts where the solid one ends.
        beyond = ~ok | np.concatenate([~ok[1:], [False]])
        ax.plot(
            grid,
            np.where(beyond, y, np.nan),
            color=color,
            linestyle=":",
            linewidth=2.2,
            label=f"{label} (beyond range)",
        )


def figure(ex: Extrapolation):
    """The figure and its three axes (throughput, response time, utilisation)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = float(max(ex.at.max(), ex.runs.n.max()))
    grid = np.linspace(min(1.0, float(ex.runs.n.min())), top * 1.05, 400)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    fr, held = ex.fit_runs, ex.held
    for m, mod in ex.models.items():
        p = mod.predict(grid)
        c = COLORS.get(m, "tab:grey")
        _split(axes[0], grid, p.x, p.in_range, c, m)
        if not np.all(np.isnan(p.r)):
            _split(axes[1], grid, p.r * 1e3, p.in_range, c, m)
        k = max(p.util, key=lambda k: p.util[k][-1]) if p.util else None
        if k:
            _split(axes[2], grid, p.util[k] * 100, p.in_range, c, f"{m} ({k})")
    for ax, ys, scale in ((axes[0], "x", 1), (axes[1], "r", 1e3)):
        ax.scatter(fr.n, getattr(fr, ys) * scale, color="black", zorder=3, label="measured (fitted)")
        if held is not None:
            ax.scatter(
                held.n,
                getattr(held, ys) * scale,
                facecolors="none",
                edgecolors="black",
                s=60,
                zorder=3,
                label="measured (held out)",
            )
    for k, u in ex.runs.util.items():
        axes[2].scatter(ex.runs.n, u * 100, marker="x", zorder=3, label=f"measured {k}")
    axes[2].axhline(ex.util_bound * 100, color="grey", linestyle="--", linewidth=1)
    axes[0].set(title="throughput", xlabel="concurrency", ylabel="per second")
    axes[1].set(title="response time", xlabel="concurrency", ylabel="ms")
    axes[2].set(title="utilisation", xlabel="concurrency", ylabel="%", ylim=(0, 105))
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"extrapolation of {ex.runs.source} (dotted: beyond the model's range)")
    fig.tight_layout()
    return fig, axes


def plot(ex: Extrapolation, path: str | Path) -> Path:
    """Writes the figure to `path` (PNG); returns it."""
    import matplotlib.pyplot as plt

    fig, _ = figure(ex)
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
