"""Plots of a :class:`~mbdgen.results.Result` (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from mbdgen.results import Result, check_destination

#: File types :func:`plot_result` writes (matplotlib's vector and raster formats).
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def plot_result(result: Result, path: str | Path) -> Path:
    """Coordinates over time, and the constraint residual ‖Φ‖ on a log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = check_destination(path, PLOT_SUFFIXES)
    fig, (ax_q, ax_phi) = plt.subplots(
        2, 1, figsize=(8, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]}
    )
    for i, name in enumerate(result.coordinates):
        ax_q.plot(result.t, result.q[:, i], label=name)
    ax_q.set_ylabel("q")
    ax_q.legend(loc="best", ncol=min(4, len(result.coordinates)), fontsize="small")
    ax_q.grid(True, alpha=0.3)
    info = result.info
    title = f"{info.get('model', '')}: {info.get('method', '')} k={info.get('order', '')}, "
    title += f"h={info.get('h', 0):g}"
    if info.get("alpha") or info.get("beta"):
        title += f", Baumgarte α={info['alpha']:g}, β={info['beta']:g}"
    ax_q.set_title(title)
    if result.phi_norm.size:
        ax_phi.semilogy(result.t, result.phi_norm.clip(min=1e-300), color="k", lw=0.8)
    ax_phi.set_ylabel("‖Φ‖₂")
    ax_phi.set_xlabel("t [s]")
    ax_phi.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
