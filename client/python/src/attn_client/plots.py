"""The report's charts as matplotlib figures (the `plot` extra); the colours are the codelab's."""
from __future__ import annotations

from attn_client.spec import format_value

_COLOURS = ["#d1242f", "#0969da", "#8250df", "#1a7f37", "#bf8700", "#57606a"]
_MARKERS = ["o-", "s-", "d-", "^-", "v-", "x-"]


def figure(chart):
    """A table.Chart as a line chart (latency vs T or B, a line per backend and dtype, on a log2 axis) or
    horizontal bars of median ms, lower is better (the codelab's show_bars)."""
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("Results.plot needs matplotlib: pip install 'attn_client[plot]'") from e
    if chart.kind == "lines":
        fig, ax = plt.subplots(figsize=(8, 5))
        for i, (label, points) in enumerate(chart.lines.items()):
            xs = sorted(points)
            ax.plot(xs, [points[x] for x in xs], _MARKERS[i % len(_MARKERS)], label=label,
                    color=_COLOURS[i % len(_COLOURS)])
        ticks = sorted({x for points in chart.lines.values() for x in points})
        ax.set_xlabel(chart.x_label)
        ax.set_ylabel(chart.value_label)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [str(x) for x in ticks])
        ax.legend()
        ax.grid(True, alpha=0.25)
    else:
        fig, ax = plt.subplots(figsize=(8, 0.6 * len(chart.bars) + 1.5))
        ax.barh([label for label, _ in chart.bars], [v for _, v in chart.bars], color="#0969da")
        ax.invert_yaxis()
        for y, (_, v) in enumerate(chart.bars):
            ax.annotate(f" {format_value(v, 'ms')} ms", (v, y), va="center", fontsize=9)
        ax.set_xlabel(f"{chart.value_label} (lower is better)")
        ax.grid(True, axis="x", alpha=0.25)
    ax.set_title(chart.title)
    fig.tight_layout()
    plt.close(fig)  # returned, not also drawn by pyplot's own figure list
    return fig
