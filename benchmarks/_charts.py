"""The pictures in RESULTS.md: PNGs drawn with matplotlib (the `bench` extra; never a runtime
dependency of hcmcp), Agg backend, one file per chart beside RESULTS.md.

Each benchmark passes its own numbers in; nothing here measures. A missing matplotlib is a
note in the output, not a failure: the tables are the results, the charts are their pictures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks._harness import REPO

DEFAULT_DIR = REPO / "benchmarks"
COLOURS = {
    "hcmcp": "#2b7bb9",
    "MCPServer": "#d95f02",
    "TS SDK": "#1b9e77",
    "FastMCP": "#7570b3",
    "floor": "#555555",
}


def charts_dir(args: Any) -> Path | None:
    """Where this run draws: --charts DIR, else benchmarks/ for a full run, nowhere for --quick."""
    if getattr(args, "charts", None):
        return Path(args.charts)
    return None if args.quick else DEFAULT_DIR


def colour(label: str, index: int) -> str:
    for prefix, value in COLOURS.items():
        if label.startswith(prefix):
            return value
    return f"C{index % 10}"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(directory: Path | None, name: str, painter) -> str:
    """Run ``painter(plt) -> figure`` and save it as DIR/name.png; returns a line for the notes."""
    if directory is None:
        return ""
    try:
        plt = _pyplot()
    except ImportError:
        return f"chart {name}.png not drawn: matplotlib is missing (pip install '.[bench]')"
    directory.mkdir(parents=True, exist_ok=True)
    figure = painter(plt)
    path = directory / f"{name}.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    try:
        shown = path.relative_to(REPO)
    except ValueError:
        shown = path
    return f"chart: {shown}"


def bars(
    plt,
    title: str,
    groups: list[str],
    series: dict[str, list[float | None]],
    unit: str,
    floor: tuple[str, float] | None = None,
    log: bool = False,
    horizontal_labels: bool = False,
):
    """Grouped bars: one group per entry of ``groups``, one bar per series in each."""
    figure, axes = plt.subplots(
        figsize=(max(6.0, 1.1 * len(groups) * max(1, len(series)) ** 0.5 + 2), 4.2)
    )
    width = 0.8 / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        xs = [g + (index - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [v if v is not None else 0 for v in values]
        drawn = axes.bar(xs, heights, width, label=name, color=colour(name, index))
        for rect, value in zip(drawn, values, strict=True):
            if value is not None:
                axes.annotate(
                    f"{value:.0f}" if value >= 10 else f"{value:.1f}",
                    (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
    if floor:
        axes.axhline(floor[1], color=COLOURS["floor"], linestyle="--", linewidth=1, label=floor[0])
    axes.set_xticks(range(len(groups)))
    axes.set_xticklabels(
        groups,
        rotation=0 if horizontal_labels else 15,
        ha="center" if horizontal_labels else "right",
        fontsize=8,
    )
    axes.set_ylabel(unit)
    if log:
        axes.set_yscale("log")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=7)
    axes.grid(axis="y", alpha=0.3)
    return figure


def lines(plt, title: str, panels: list[tuple[str, str, dict[str, list[tuple[float, float]]]]]):
    """Side-by-side panels of (x, y) lines: ``panels`` = [(panel title, y unit, {series: points})]."""
    figure, all_axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0))
    if len(panels) == 1:
        all_axes = [all_axes]
    for axes, (panel, unit, series) in zip(all_axes, panels, strict=True):
        seen: dict[str, int] = {}
        for index, (name, points) in enumerate(series.items()):
            if points:
                xs, ys = zip(*sorted(points), strict=True)
                shade = colour(name, index)
                # variants of one server: same colour, own marker
                nth = seen[shade] = seen.get(shade, -1) + 1
                axes.plot(
                    xs,
                    ys,
                    label=name,
                    color=shade,
                    marker="os^Dv"[nth % 5],
                    linestyle=("-", "--", ":", "-.")[nth % 4],
                    alpha=1.0 - 0.15 * min(nth, 3),
                )
        axes.set_xscale("log")
        axes.set_xlabel("checks in the project")
        axes.set_ylabel(unit)
        axes.set_title(panel, fontsize=10)
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(title, fontsize=11)
    return figure
