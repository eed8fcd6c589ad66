"""A table as attn-client prints it (text), as a notebook shows it (HTML) and as a DataFrame; and
the data of a table's chart, which plots.py draws."""
from __future__ import annotations

import html
from dataclasses import dataclass, field


@dataclass
class Chart:
    """A table's chart: "lines" (median per x, a line per series) or "bars" (label, median)."""

    kind: str
    title: str
    x_label: str = ""
    value_label: str = ""
    lines: dict[str, dict[float, float]] = field(default_factory=dict)
    bars: list[tuple[str, float]] = field(default_factory=list)


@dataclass
class Table:
    """One of the codelab's tables. str() is attn-client's text; in a notebook it shows as HTML
    (the codelab's show_table); to_pandas() gives the cells as a DataFrame."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    right_aligned: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # unsupported or failed cells, and why
    key: str = ""  # what Results.table() finds it by: a section's name, "timing", "causal effect", "fp8"
    chart: Chart | None = None

    def _right(self, i: int) -> bool:
        return i < len(self.right_aligned) and self.right_aligned[i]

    def __str__(self) -> str:
        width = [max([len(h)] + [len(r[i]) for r in self.rows if i < len(r)]) for i, h in enumerate(self.headers)]

        def line(cells: list[str]) -> str:
            out = []
            for i, w in enumerate(width):
                cell = cells[i] if i < len(cells) else ""
                out.append(cell.rjust(w) if self._right(i) else cell.ljust(w) if i + 1 < len(width) else cell)
            return "  ".join(out) + "\n"

        rule = "─" * (sum(width) + 2 * max(len(width) - 1, 0)) + "\n"
        body = line(self.headers) + rule + "".join(line(r) for r in self.rows)
        return (self.title + "\n" if self.title else "") + body + "".join(n + "\n" for n in self.notes)

    def _repr_html_(self) -> str:
        def row(cells, tag, border):
            return "<tr>" + "".join(
                f"<{tag} style='text-align:{'right' if self._right(i) else 'left'}; border-bottom:1px solid {border};"
                f" padding:6px;'>{html.escape(c)}</{tag}>" for i, c in enumerate(cells)) + "</tr>"

        title = f"<h4 style='margin: 0 0 8px 0;'>{html.escape(self.title)}</h4>" if self.title else ""
        notes = "".join(f"<div style='font-size:12px; color:#57606a;'>{html.escape(n.strip())}</div>" for n in self.notes)
        return (f"<div style='font-family: system-ui; max-width: 980px;'>{title}<table class='attn-table' "
                f"style='border-collapse: collapse; width: 100%; font-size: 13px;'><thead>{row(self.headers, 'th', '#d0d7de')}"
                f"</thead><tbody>{''.join(row(r, 'td', '#eef1f4') for r in self.rows)}</tbody></table>{notes}</div>")

    def to_pandas(self):
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.headers)
