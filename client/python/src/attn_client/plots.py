"""The codelab's plots of a benchmark job, with matplotlib (the `plot` extra).

Built from the same section views as the tables (results.sections), so a plot and its table
always show the same cases; the colours are the codelab's.
"""
from __future__ import annotations

from attn_client import results as res

_COLOURS = ["#d1242f", "#0969da", "#8250df", "#1a7f37", "#bf8700", "#57606a"]
_MARKERS = ["o-", "s-", "d-", "^-", "v-", "x-"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ImportError("Results.plot needs matplotlib: pip install 'attn_client[plot]'") from e
    return plt


def _sweep(plt, sec: res.Section):
    """Latency vs T (or B), one line per backend and dtype; unsupported points left out."""
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, series in enumerate(sec.series):
        points = [(x, sec.cells[(series, x)].stats.median_ms) for x in sec.points
                  if (series, x) in sec.cells and res.is_ok(sec.cells[(series, x)])]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], _MARKERS[i % len(_MARKERS)], label=series,
                    color=_COLOURS[i % len(_COLOURS)])
    seq = sec.kind == "seq_sweep"
    causal = sec.cases[0].case.causal
    ax.set_xlabel("Sequence length" if seq else "Batch size")
    ax.set_ylabel("Median ms per call")
    ax.set_title(f"{'Causal attention' if causal else 'Attention'} latency vs {'sequence length' if seq else 'batch size'}")
    ax.set_xscale("log", base=2)
    ax.set_xticks(sec.points, [str(p) for p in sec.points])
    ax.legend()
    ax.grid(True, alpha=0.25)
    fig.tight_layout()
    return fig


def _bars(plt, labels: list[str], values: list[float], title: str):
    """Horizontal bars of median ms, lower is better (the codelab's show_bars)."""
    fig, ax = plt.subplots(figsize=(8, 0.6 * len(labels) + 1.5))
    ax.barh(labels, values, color="#0969da")
    ax.invert_yaxis()
    for y, v in enumerate(values):
        ax.annotate(f" {res.format_ms(v)} ms", (v, y), va="center", fontsize=9)
    ax.set_xlabel("Median ms per call (lower is better)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.25)
    fig.tight_layout()
    return fig


def figures(results: res.Results, only: str | None = None) -> list[tuple[str, object]]:
    """(key, Figure) for every plot the job has data for, keyed as Results.table() keys tables;
    with `only`, just that key's (a figure costs tens of ms to lay out: make only what is asked)."""
    plt = _pyplot()
    out = []
    wanted = (lambda key: True) if only is None else (lambda key: key.lower() == only.lower())
    defaults = res.default_shape_cases(results.cases) if wanted("timing") else []
    if defaults:
        b, t, n, h = res.DEFAULT_SHAPE
        out.append(("timing", _bars(plt, [res.series_label(r) for r in defaults],
                                    [r.stats.median_ms for r in defaults],
                                    f"Attention latency (ms per call) — B={b}, T={t}, N={n}, H={h}")))
    for sec in results.sections:
        ok = [r for r in sec.cases if res.is_ok(r)]
        if not ok or not wanted(sec.name):
            continue
        if sec.kind in ("seq_sweep", "batch_sweep"):
            out.append((sec.name, _sweep(plt, sec)))
        elif sec.kind == "variants":
            labels = [f"{res._pattern(r.case.shape)} (K={res.kv_heads(r.case.shape)})" for r in ok]
            out.append((sec.name, _bars(plt, labels, [r.stats.median_ms for r in ok], sec.title)))
        elif any(res.takes_fp8_recipe(results.server, r.case.backend) for r in sec.cases):  # FP8 beside bf16, or bf16 alone
            out.append((sec.name, _bars(plt, [res.series_label(r) for r in ok], [r.stats.median_ms for r in ok],
                                        f"FP8 vs bf16 — {res.problem_label(ok[0].case)}")))
    for _, fig in out:
        plt.close(fig)  # returned, not also drawn by pyplot's own figure list
    return out
