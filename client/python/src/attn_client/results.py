"""A benchmark job's results: the codelab's tables (as attn-client prints them), a DataFrame of
every case, and the plots.

The tables follow attn-client's report views (client/report.cc, client/render_text.cc): cases
are grouped by section, a section where only T varies is a sequence sweep (a row per T, a
column per backend and dtype), only B a batch sweep, only K the MHA/GQA/MQA table, anything
else a list; the default shape's "Attention timing" table comes first and the causal-effect and
FP8 tables follow the first list sections that have them. tests/test_tables.py holds this
module to attn-client's golden output (tests/client/golden/), so the two stay one design.
"""
from __future__ import annotations

import html
import json
import math
import pathlib
from dataclasses import dataclass, field
from typing import Any

import grpc

from attn_client._proto.attention.v1 import attention_pb2 as pb

# The codelab's default problem, (B, T, N, H) = (4, 128, 8, 64): the "Attention timing" table.
DEFAULT_SHAPE = (4, 128, 8, 64)
_CODE_NAMES = {c.value[0]: c.name for c in grpc.StatusCode}


# --- one case ----------------------------------------------------------------------------------

def status_name(r: pb.CaseResult) -> str:
    """"OK" or the name of the gRPC code the case ended with."""
    return _CODE_NAMES.get(r.status, f"CODE_{r.status}")


def is_ok(r: pb.CaseResult) -> bool:
    return status_name(r) == "OK"


def is_unsupported(r: pb.CaseResult) -> bool:
    """FAILED_PRECONDITION: the backend cannot run the case on that device (reported, not failed)."""
    return status_name(r) == "FAILED_PRECONDITION"


def takes_fp8_recipe(server: pb.ServerInfo, backend: str) -> bool:
    """Whether the server says `backend` quantises to FP8 under the job's recipe (a capability of
    the backend, not its name)."""
    return any(v.backend == backend and v.takes_fp8_recipe for v in server.backends)


def full_precision_peer(server: pb.ServerInfo, backend: str) -> str:
    """The backend an FP8 backend's results are compared with ("cudnn" for cudnn_fp8); "" if none."""
    return next((v.full_precision_peer for v in server.backends if v.backend == backend), "")


def kv_len(s: pb.Shape) -> int:
    return s.kv_len if s.kv_len > 0 else s.q_len


def kv_heads(s: pb.Shape) -> int:
    return s.num_kv_heads if s.num_kv_heads > 0 else s.num_heads


def dtype_label(d: int) -> str:
    return pb.DType.Name(d).lower() if d else "unspecified"


def q_shape(s: pb.Shape) -> str:
    return f"({s.batch}, {s.q_len}, {s.num_heads}, {s.head_dim})"


def k_shape(s: pb.Shape) -> str:
    return f"({s.batch}, {kv_len(s)}, {kv_heads(s)}, {s.head_dim})"


def kv_lens_label(lens) -> str:
    """The lengths as attn-client writes them: "[1,5,8192]" up to 8, else "[1..8192] ragged" or
    "[all 4096]"; empty for none."""
    lens = list(lens)
    if not lens:
        return ""
    if len(lens) <= 8:
        return "[" + ",".join(str(x) for x in lens) + "]"
    lo, hi = min(lens), max(lens)
    return f"[all {lo}]" if lo == hi else f"[{lo}..{hi}] ragged"


def problem_label(c: pb.BenchmarkCase) -> str:
    """"B4 T128 S128 N8 K8 H64", plus " causal" and " kv_lens=[...]"."""
    s = c.shape
    return (f"B{s.batch} T{s.q_len} S{kv_len(s)} N{s.num_heads} K{kv_heads(s)} H{s.head_dim}"
            + (" causal" if c.causal else "") + (f" kv_lens={kv_lens_label(c.kv_lens)}" if c.kv_lens else ""))


def reads_key_values(sec) -> bool:
    """Whether a section is bound by reading K and V (queries shorter than the keys, or kv_lens):
    its table adds the effective K/V bandwidth, as attn-client's does."""
    return any(r.case.kv_lens or kv_len(r.case.shape) > r.case.shape.q_len for r in sec.cases)


def series_label_of_case(c: pb.BenchmarkCase) -> str:
    return f"{c.backend or 'auto'} {dtype_label(c.dtype)}"


def series_label(r: pb.CaseResult) -> str:
    """The requested backend (with what auto resolved to) and the dtype: "auto→cudnn bfloat16"."""
    backend = r.case.backend or "auto"
    if backend == "auto" and r.backend:
        backend = f"auto→{r.backend}"
    return f"{backend} {dtype_label(r.case.dtype)}"


def format_ms(ms: float) -> str:
    """3-4 significant digits: "0.0123", "1.234", "123.4"."""
    return f"{ms:.1f}" if ms >= 100 else f"{ms:.3f}" if ms >= 1 else f"{ms:.4f}"


def format_error(v: float) -> str:
    return "-" if v < 0 else f"{v:.2e}"


# --- the columns of every case -----------------------------------------------------------------

_FP8_TENSORS = ("q", "k", "v", "s", "o")
_FP8_GROUPS = (("fp8_scale_", "scales_used"), ("fp8_amax_", "amaxes_seen"), ("fp8_next_scale_", "next_scales"))


def _num(v: float) -> float | None:
    return v if math.isfinite(v) else None


def case_columns(r: pb.CaseResult, replica: str = "") -> dict[str, Any]:
    """A case as attn-client's results.csv / results.json row: the same columns, in order."""
    c, s, st = r.case, r.case.shape, r.stats
    row = {
        "index": r.index, "section": c.section, "requested_backend": c.backend or "auto", "backend": r.backend,
        "dtype": dtype_label(c.dtype), "B": s.batch, "T": s.q_len, "S": kv_len(s), "N": s.num_heads,
        "K": kv_heads(s), "H": s.head_dim, "causal": c.causal, "status": status_name(r), "message": r.message,
        "seed": r.seed,
        "repeats": st.count, "min_ms": _num(st.min_ms), "median_ms": _num(st.median_ms), "mean_ms": _num(st.mean_ms),
        "p10_ms": _num(st.p10_ms), "p90_ms": _num(st.p90_ms), "p99_ms": _num(st.p99_ms),
        "stddev_ms": _num(st.stddev_ms), "budget_cut": r.budget_cut, "tflops": _num(r.tflops), "gbps": _num(r.gbps),
        "workspace_bytes": r.workspace_bytes, "peak_arena_bytes": r.peak_arena_bytes, "timing": r.timing,
        "input_sets": r.input_sets, "max_abs_error": _num(r.max_abs_error), "rel_l2_error": _num(r.rel_l2_error),
        "numerics": r.numerics, "causal_first_diff": _num(r.causal_first_diff),
        "causal_last_diff": _num(r.causal_last_diff), "device": r.device, "device_name": r.device_name,
        "hostname": r.hostname, "replica": replica,
    }
    # cudnn_fp8 cases: the recipe state after the case's last call; None for the others.
    fp8 = r.HasField("fp8")
    row["fp8_recipe"] = r.fp8.recipe if fp8 else None
    for prefix, group in _FP8_GROUPS:
        for t in _FP8_TENSORS:
            row[prefix + t] = _num(getattr(getattr(r.fp8, group), t)) if fp8 else None
    row["fp8_calls_recorded"] = r.fp8.calls_recorded if fp8 else None
    row["fp8_quantize_ms"] = _num(r.fp8.quantize_ms) if fp8 else None
    row["fp8_max_diff_vs_cudnn"] = _num(r.fp8.max_diff_vs_cudnn) if fp8 else None
    return row


def _case_from_columns(row: dict[str, Any]) -> tuple[pb.CaseResult, str]:
    """The inverse of case_columns, for results.json written by attn-client."""
    r = pb.CaseResult(index=row["index"], seed=row.get("seed", 0), backend=row["backend"], message=row["message"],
                      budget_cut=row["budget_cut"], timing=row["timing"], input_sets=row["input_sets"],
                      numerics=row["numerics"], device=row["device"], device_name=row["device_name"],
                      hostname=row["hostname"], workspace_bytes=row["workspace_bytes"],
                      peak_arena_bytes=row["peak_arena_bytes"])
    _set_status(r, row["status"])
    r.case.section = row["section"]
    r.case.backend = row["requested_backend"]
    r.case.dtype = pb.DType.Value(row["dtype"].upper())
    r.case.causal = row["causal"]
    r.case.shape.CopyFrom(pb.Shape(batch=row["B"], q_len=row["T"], kv_len=row["S"], num_heads=row["N"],
                                   num_kv_heads=row["K"], head_dim=row["H"]))
    r.stats.count = row["repeats"]
    for name in ("min_ms", "median_ms", "mean_ms", "p10_ms", "p90_ms", "p99_ms", "stddev_ms"):
        setattr(r.stats, name, _float(row[name]))
    for name in ("tflops", "gbps", "max_abs_error", "rel_l2_error", "causal_first_diff", "causal_last_diff"):
        setattr(r, name, _float(row[name]))
    if row.get("fp8_recipe") is not None:
        r.fp8.recipe = row["fp8_recipe"]
        for prefix, group in _FP8_GROUPS:
            for t in _FP8_TENSORS:
                setattr(getattr(r.fp8, group), t, _float(row[prefix + t]))
        r.fp8.calls_recorded = row["fp8_calls_recorded"]
        r.fp8.quantize_ms = _float(row["fp8_quantize_ms"])
        r.fp8.max_diff_vs_cudnn = _float(row["fp8_max_diff_vs_cudnn"])
    return r, row.get("replica", "")


def _float(v) -> float:
    return math.nan if v is None else float(v)


def _set_status(r: pb.CaseResult, name: str) -> None:
    r.status = grpc.StatusCode[name].value[0]


# --- tables ------------------------------------------------------------------------------------

@dataclass
class Table:
    """One of the codelab's tables. str() is attn-client's text; in a notebook it shows as HTML
    (the codelab's show_table); to_pandas() gives the cells as a DataFrame."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right_aligned: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unsupported or failed cells, and why
    key: str = ""  # what Results.table() finds it by: the section's name, "timing", "causal effect", "fp8"

    def __str__(self) -> str:
        width = [len(h) for h in self.headers]
        for row in self.rows:
            for i, cell in enumerate(row[: len(width)]):
                width[i] = max(width[i], len(cell))

        def line(cells: list[str]) -> str:
            out = ""
            for i, w in enumerate(width):
                cell = cells[i] if i < len(cells) else ""
                pad = " " * (w - min(w, len(cell)))
                right = i < len(self.right_aligned) and self.right_aligned[i]
                if i > 0:
                    out += "  "
                out += pad + cell if right else (cell + pad if i + 1 < len(width) else cell)
            return out + "\n"

        out = (self.title + "\n" if self.title else "") + line(self.headers)
        out += "─" * (sum(width) + 2 * max(len(width) - 1, 0)) + "\n"
        out += "".join(line(r) for r in self.rows)
        return out + "".join(n + "\n" for n in self.notes)

    def _repr_html_(self) -> str:
        align = [("right" if i < len(self.right_aligned) and self.right_aligned[i] else "left")
                 for i in range(len(self.headers))]
        parts = ["<div style='font-family: system-ui; max-width: 980px;'>"]
        if self.title:
            parts.append(f"<h4 style='margin: 0 0 8px 0;'>{html.escape(self.title)}</h4>")
        parts.append("<table class='attn-table' style='border-collapse: collapse; width: 100%; font-size: 13px;'><thead><tr>")
        parts += [f"<th style='text-align:{a}; border-bottom:1px solid #d0d7de; padding:6px;'>{html.escape(h)}</th>"
                  for h, a in zip(self.headers, align)]
        parts.append("</tr></thead><tbody>")
        for row in self.rows:
            parts.append("<tr>" + "".join(
                f"<td style='text-align:{a}; border-bottom:1px solid #eef1f4; padding:6px;'>{html.escape(c)}</td>"
                for c, a in zip(row, align)) + "</tr>")
        parts.append("</tbody></table>")
        parts += [f"<div style='font-size:12px; color:#57606a;'>{html.escape(n.strip())}</div>" for n in self.notes]
        return "".join(parts) + "</div>"

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.headers)


@dataclass
class Section:
    """A section's cases and how they are laid out (client/report.h's SectionView)."""

    name: str
    kind: str = "list"  # "seq_sweep", "batch_sweep", "variants" or "list"
    title: str = ""
    points: list[int] = field(default_factory=list)  # T or B values, ascending (sweeps)
    series: list[str] = field(default_factory=list)  # "naive float32", first seen first (sweeps)
    cells: dict[tuple[str, int], pb.CaseResult] = field(default_factory=dict)
    cases: list[pb.CaseResult] = field(default_factory=list)


def _fixed_fields(c: pb.BenchmarkCase, skip_b: bool, skip_t: bool, skip_k: bool) -> str:
    s = c.shape
    parts = [] if skip_b else [f"B={s.batch}"]
    if not skip_t:
        parts.append(f"T={s.q_len}")
        if kv_len(s) != s.q_len:
            parts.append(f"S={kv_len(s)}")
    parts.append(f"N={s.num_heads}")
    if not skip_k and kv_heads(s) != s.num_heads:
        parts.append(f"K={kv_heads(s)}")
    parts.append(f"H={s.head_dim}")
    if c.causal:
        parts.append("causal")
    return ", ".join(parts)


def sections(cases: list[pb.CaseResult]) -> list[Section]:
    """The cases grouped by section, in first-seen order, each with its layout and title."""
    out: dict[str, Section] = {}
    for r in cases:
        out.setdefault(r.case.section, Section(name=r.case.section)).cases.append(r)
    for sec in out.values():
        shapes = [r.case.shape for r in sec.cases]
        varies = {axis: len({f(s) for s in shapes}) > 1 for axis, f in (
            ("b", lambda s: s.batch), ("t", lambda s: s.q_len), ("n", lambda s: s.num_heads),
            ("k", kv_heads), ("h", lambda s: s.head_dim))}
        causal_varies = len({r.case.causal for r in sec.cases}) > 1
        s_follows_t = all(kv_len(s) == s.q_len for s in shapes)
        # A case with lengths needs its own row (a sweep's title cannot carry them): a list.
        others = varies["n"] or varies["h"] or causal_varies or any(r.case.kv_lens for r in sec.cases)
        if varies["t"] and s_follows_t and not varies["b"] and not varies["k"] and not others:
            sec.kind = "seq_sweep"
        elif varies["b"] and not varies["t"] and not varies["k"] and not others:
            sec.kind = "batch_sweep"
        elif varies["k"] and not varies["t"] and not varies["b"] and not others:
            sec.kind = "variants"
        first = sec.cases[0].case
        if sec.kind == "seq_sweep":
            sec.title = (f"{'Causal sequence-length sweep' if first.causal else 'Sequence-length sweep'}"
                         f" — {_fixed_fields(first, False, True, False)}")
        elif sec.kind == "batch_sweep":
            sec.title = f"Batch-size sweep — {_fixed_fields(first, True, False, False)}"
        elif sec.kind == "variants":
            sec.title = f"Multi-head attention variants (MHA, GQA, MQA) — {_fixed_fields(first, False, False, True)}"
        else:
            heading = sec.name or "Cases"
            sec.title = heading[0].upper() + heading[1:]
        if sec.kind in ("seq_sweep", "batch_sweep"):
            for r in sec.cases:
                x = r.case.shape.q_len if sec.kind == "seq_sweep" else r.case.shape.batch
                label = series_label(r)
                if label not in sec.series:
                    sec.series.append(label)
                sec.cells[(label, x)] = r
            sec.points = sorted({x for _, x in sec.cells})
    return list(out.values())


def default_shape_cases(cases: list[pb.CaseResult]) -> list[pb.CaseResult]:
    """The OK, non-causal cases at the codelab's default shape, one per series."""
    out, seen = [], set()
    b, t, n, h = DEFAULT_SHAPE
    for r in cases:
        s = r.case.shape
        if (not is_ok(r) or r.case.causal or (s.batch, s.q_len, kv_len(s), s.num_heads, kv_heads(s), s.head_dim)
                != (b, t, t, n, n, h)):
            continue
        if series_label(r) not in seen:
            seen.add(series_label(r))
            out.append(r)
    return out


def _cell(r: pb.CaseResult | None, notes: list[str], series: str) -> str:
    """A median, "*" when the case budget cut its repeats; "n/a" unsupported, "error" failed."""
    if r is None:
        return ""
    if is_ok(r):
        return format_ms(r.stats.median_ms) + ("*" if r.budget_cut else "")
    note = f"  {'n/a' if is_unsupported(r) else status_name(r)}  {series}: {r.message}"
    if note not in notes:
        notes.append(note)
    return "n/a" if is_unsupported(r) else "error"


def _sweep_table(sec: Section) -> Table:
    t = Table(title=sec.title, headers=["Seq len" if sec.kind == "seq_sweep" else "Batch size"],
              right_aligned=[True], key=sec.name)
    for series in sec.series:
        t.headers.append(f"{series} (ms)")
        t.right_aligned.append(True)
    for x in sec.points:
        t.rows.append([str(x)] + [_cell(sec.cells.get((series, x)), t.notes, series) for series in sec.series])
    return t


def _pattern(s: pb.Shape) -> str:
    k = kv_heads(s)
    return "MHA" if k == s.num_heads else "MQA" if k == 1 else "GQA"


def _variants_table(sec: Section) -> Table:
    t = Table(title=sec.title, headers=["Pattern", "Q shape", "K shape", "V shape", "Output shape", "Backend", "Median (ms)"],
              right_aligned=[False] * 6 + [True], key=sec.name)
    for r in sec.cases:
        s = r.case.shape
        t.rows.append([_pattern(s), q_shape(s), k_shape(s), k_shape(s), q_shape(s), series_label(r),
                       _cell(r, t.notes, series_label(r))])
    return t


def _list_table(sec: Section) -> Table:
    kv = reads_key_values(sec)
    headers = ["Backend", "Problem", "Median (ms)", "TFLOP/s"] + (["K/V GB/s"] if kv else []) + [
        "Max |err|", "Rel L2 err", "Reference"]
    t = Table(title=sec.title, headers=headers,
              right_aligned=[False, False, True, True] + ([True] if kv else []) + [True, True, False], key=sec.name)
    for r in sec.cases:
        label = series_label(r)
        row = [label, problem_label(r.case), _cell(r, t.notes, label)]
        if is_ok(r):
            row += [f"{r.tflops:.2f}"] + ([f"{r.kv_gbps:.1f}"] if kv else []) + [
                format_error(r.max_abs_error), format_error(r.rel_l2_error), r.numerics]
        t.rows.append(row + [""] * (len(headers) - len(row)))
    return t


def _causal_effect_table(r: pb.CaseResult) -> Table:
    """The codelab's "Causal masking effect on attention output" rows of one causal case."""
    return Table(
        title=f"Causal masking effect on attention output — {series_label(r)}, {problem_label(r.case)}",
        headers=["Position", "Max diff (causal vs full)", "Expected"], right_aligned=[False, True, False],
        rows=[["First (t=0)", f"{r.causal_first_diff:.4f}", "Large — causal restricts to self only"],
              ["Last (t=T-1)", f"{r.causal_last_diff:.2e}", "~0 — attends to all positions either way"]],
        key="causal effect")


def _fp8_values(v: pb.Fp8Values) -> str:
    return f"q {v.q:.4g}, k {v.k:.4g}, v {v.v:.4g}, s {v.s:.4g}, o {v.o:.4g}"


def _fp8_table(f: pb.CaseResult, sec: Section, gpu: str, peer: str) -> Table:
    """The codelab's FP8 table for an FP8 case (cudnn_fp8) beside its section's case of the same
    problem on the FP8 backend's full-precision peer (cudnn); or its "not available" table."""
    t = Table(title="", headers=["", "Value"], key="fp8")
    if not is_ok(f):
        t.title = "FP8 attention — not available on this GPU"
        t.rows = [["GPU", gpu], ["FP8 support", f.message]]
        return t
    t.title = f"FP8 attention with cuDNN (TransformerEngine delayed scaling) — {problem_label(f.case)}"
    bf16 = None
    for c in sec.cases:
        if is_ok(c) and peer and c.backend == peer and c.case.shape == f.case.shape and c.case.causal == f.case.causal:
            bf16 = c
    fp8, ms = f.fp8, f.stats.median_ms
    dt = dtype_label(f.case.dtype)
    t.rows = [["GPU", gpu], ["Input dtype", dt], ["FP8 output dtype", f"{dt} (dequantised from E4M3)"],
              ["Output shape", q_shape(f.case.shape)],
              [f"Max |{peer} bf16 - {f.backend}|",
               f"{fp8.max_diff_vs_cudnn:.2e}" if fp8.max_diff_vs_cudnn >= 0 else "- (run with --check)"],
              ["FP8 median (ms)", format_ms(ms) + (f", of which quantise {format_ms(fp8.quantize_ms)}"
                                                    if fp8.quantize_ms >= 0 else "")]]
    if bf16 is not None:
        b = bf16.stats.median_ms
        t.rows += [[f"bf16 {peer} median (ms)", format_ms(b)], ["FP8 speed-up over bf16", f"{b / ms:.2f}x"]]
    if f.HasField("fp8"):
        t.rows += [["Recipe", fp8.recipe], ["Scales used", _fp8_values(fp8.scales_used)],
                   ["Amaxes seen", _fp8_values(fp8.amaxes_seen)]]
    return t


# --- the job -----------------------------------------------------------------------------------

class Results:
    """What a benchmark job returned: every case (CaseResult messages, in index order), the
    server's info and the options. str() is attn-client's tables; in a notebook the tables
    show as HTML."""

    def __init__(self, server: pb.ServerInfo | None = None, options: pb.BenchmarkOptions | None = None,
                 target: str = "", command: str = "", created: str = "", wall_seconds: float = 0.0):
        self.server = server or pb.ServerInfo()
        self.options = options or pb.BenchmarkOptions()
        self.target, self.command, self.created = target, command, created
        self.wall_seconds = wall_seconds
        self.cases: list[pb.CaseResult] = []
        self.replicas: list[str] = []  # the gRPC peer of each case, where known (attn-client's)

    def add(self, result: pb.CaseResult, replica: str = "") -> None:
        self.cases.append(result)
        self.replicas.append(replica)

    def __len__(self) -> int:
        return len(self.cases)

    @property
    def summary(self) -> dict[str, int]:
        """Cases ok, unsupported (FAILED_PRECONDITION) and failed (any other status)."""
        ok = sum(is_ok(r) for r in self.cases)
        unsupported = sum(is_unsupported(r) for r in self.cases)
        return {"cases": len(self.cases), "ok": ok, "unsupported": unsupported, "failed": len(self.cases) - ok - unsupported}

    # -- DataFrame --

    def rows(self) -> list[dict[str, Any]]:
        """One dict per case with attn-client's results.csv columns."""
        return [case_columns(r, rep) for r, rep in zip(self.cases, self.replicas)]

    def to_pandas(self):
        """A DataFrame with a row per case and attn-client's results.csv columns (pandas extra)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Results.to_pandas needs pandas: pip install 'attn_client[pandas]'") from e
        columns = list(case_columns(pb.CaseResult()).keys())
        return pd.DataFrame(self.rows(), columns=columns)

    # -- tables --

    @property
    def sections(self) -> list[Section]:
        return sections(self.cases)

    def tables(self) -> list[Table]:
        """Every table in attn-client's order."""
        out = []
        defaults = default_shape_cases(self.cases)
        if defaults:
            b, t, n, h = DEFAULT_SHAPE
            out.append(Table(title=f"Attention timing — B={b}, T={t}, N={n}, H={h}",
                             headers=["Implementation", "Median ms/call"], right_aligned=[False, True],
                             rows=[[series_label(r), format_ms(r.stats.median_ms)] for r in defaults], key="timing"))
        causal_effect_shown = False
        for sec in self.sections:
            out.append(_sweep_table(sec) if sec.kind in ("seq_sweep", "batch_sweep")
                       else _variants_table(sec) if sec.kind == "variants" else _list_table(sec))
            if sec.kind != "list":
                continue
            for r in sec.cases:
                if not causal_effect_shown and is_ok(r) and r.causal_first_diff >= 0:
                    out.append(_causal_effect_table(r))
                    causal_effect_shown = True
            for r in sec.cases:
                if takes_fp8_recipe(self.server, r.case.backend):
                    gpu = r.device_name or (self.server.devices[0].name if self.server.devices else "-")
                    out.append(_fp8_table(r, sec, gpu, full_precision_peer(self.server, r.case.backend)))
        return out

    def table(self, section: str) -> Table:
        """One table: a section by the name the job gave it ("sequence sweep", "batch sweep",
        "MHA/GQA/MQA", "causal sweep", "correctness", "FP8 vs bf16"), or "timing" (the default
        shape), "causal effect" or "fp8" (the FP8 recipe table)."""
        tables = self.tables()
        for t in tables:
            if t.key.lower() == section.lower():
                return t
        raise KeyError(f"no table {section!r}; this job has {', '.join(repr(t.key) for t in tables)}")

    def server_line(self) -> str:
        info = self.server
        if not info.hostname:
            return ""
        devices = ", ".join(d.name for d in info.devices) or "no devices"
        return (f"server: attn-server {info.version} on {info.hostname} ({devices}"
                f"{', cuDNN ' + info.cudnn_version if info.cudnn_version else ''})"
                f"{'; cpu backend: ' + info.note if info.cpu_fallback else ''}")

    def summary_line(self) -> str:
        s = self.summary
        out = (f"{s['cases']} cases: {s['ok']} ok, {s['unsupported']} unsupported, {s['failed']} failed in "
               f"{self.wall_seconds:.2f} s.")
        if s["ok"]:
            timing = next(r.timing for r in self.cases if is_ok(r))
            out += f" Times are device time per call, median ({timing}); * the case budget cut its repeats."
        return out

    def __str__(self) -> str:
        out = self.server_line() + "\n\n" if self.server_line() else ""
        out += "".join(str(t) + "\n" for t in self.tables())
        out += self.summary_line() + "\n"
        served: dict[str, int] = {}
        for r, rep in zip(self.cases, self.replicas):
            if rep:
                who = f"{r.hostname} ({rep})"
                served[who] = served.get(who, 0) + 1
        if served:
            out += "served by:" + ";".join(f" {who} {n}" for who, n in sorted(served.items())) + "\n"
        return out

    def _repr_html_(self) -> str:
        head = f"<p>{html.escape(self.server_line())}</p>" if self.server_line() else ""
        return head + "<br>".join(t._repr_html_() for t in self.tables()) + f"<p>{html.escape(self.summary_line())}</p>"

    def __repr__(self) -> str:
        return f"<Results {self.summary_line()}>"

    # -- plots --

    def plot(self, section: str | None = None):
        """matplotlib figures of the codelab's plots: latency vs sequence length per backend
        (each sequence sweep), vs batch size, the default shape's bars, MHA/GQA/MQA, FP8 vs
        bf16. A list of every one, or the one for `section` (as table() names them)."""
        from attn_client.plots import figures

        if section is None:
            return [f for _, f in figures(self)]
        for key, f in figures(self, only=section):
            if key.lower() == section.lower():
                return f
        raise KeyError(f"no plot {section!r}; this job has {', '.join(repr(k) for k, _ in figures(self))}")

    # -- attn-client's files --

    @classmethod
    def from_json(cls, source) -> "Results":
        """Results from attn-client's results.json (schema attn.bench.v1): a path, JSON text or the
        parsed dict; so a sweep run with `attn-client bench --out DIR` opens here too."""
        if isinstance(source, (str, pathlib.Path)) and not str(source).lstrip().startswith("{"):
            doc = json.loads(pathlib.Path(source).read_text())
        else:
            doc = json.loads(source) if isinstance(source, str) else source
        if doc.get("schema") != "attn.bench.v1":
            raise ValueError(f"not an attn.bench.v1 document (schema {doc.get('schema')!r})")
        s, o = doc["server"], doc["options"]
        server = pb.ServerInfo(version=s["version"], hostname=s["hostname"],
                               cuda_runtime_version=s["cuda_runtime_version"],
                               cuda_driver_version=s["cuda_driver_version"], cudnn_version=s["cudnn_version"],
                               cpu_fallback=s["cpu_fallback"],
                               devices=[pb.DeviceInfo(index=d["index"], kind=d["kind"], name=d["name"],
                                                      compute_capability=d["compute_capability"]) for d in s["devices"]],
                               backends=[pb.BackendVerdict(backend=b["name"], takes_fp8_recipe=b["takes_fp8_recipe"],
                                                           full_precision_peer=b["full_precision_peer"])
                                         for b in s.get("backends", [])])
        options = pb.BenchmarkOptions(seed=o["seed"], cuda_graph=o["cuda_graph"], check_numerics=o["check_numerics"])
        for name in ("warmup", "repeats", "case_budget_seconds"):
            if o.get(name) is not None:
                setattr(options, name, o[name])
        out = cls(server=server, options=options, target=doc["target"], command=doc["command"],
                  created=doc["created"], wall_seconds=doc["wall_seconds"] or 0.0)
        for row in doc["cases"]:
            out.add(*_case_from_columns(row))
        return out
