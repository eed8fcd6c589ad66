"""A benchmark job's results: every case, and the codelab's tables with their charts as
attn's client/report_spec.json defines them (the report attn-client prints; spec.py reads the
file). tests/test_tables.py holds the two clients to attn-client's golden output.
"""
from __future__ import annotations

import html
import json
import pathlib
from typing import Any

from attn_client._proto.attention.v1 import attention_pb2 as pb
from attn_client.spec import SPEC, Scope, columns, fill, format_value
from attn_client.table import Chart, Table


def case_text(result: pb.CaseResult, text) -> str:
    """A text of the spec over one case's columns: case_text(r, "{series} {problem}")."""
    return Scope(columns(result, SPEC["case_columns"])).text(text)


class _Report:
    """The spec's tables and lines over one job (report.cc's Builder)."""

    def __init__(self, results: "Results"):
        server = columns(results.server, SPEC["server_columns"])
        self.fields = []
        for r, replica in zip(results.cases, results.replicas):
            f = columns(r, SPEC["case_columns"], replica)
            caps = next((b for b in server["backends"] if b["name"] == f["requested_backend"]), {})
            f.update(takes_fp8_recipe=caps.get("takes_fp8_recipe", False),
                     full_precision_peer=caps.get("full_precision_peer", ""))
            self.fields.append(f)
        self.top = {"server": server, "summary": results.summary, "wall_seconds": results.wall_seconds,
                    "timing": next((f["timing"] for f in self.fields if f["status"] == "OK"), "")}
        self.shown_once: set[int] = set()

    def scope(self, i: int, section: dict) -> Scope:
        return Scope(self.fields[i], section, self.top)

    def line(self, name: str) -> str:
        return Scope(self.top).text(SPEC["lines"][name])

    def served_by(self) -> str:
        served: dict[str, int] = {}
        for i, f in enumerate(self.fields):
            if f["replica"]:
                who = self.scope(i, {}).text(SPEC["lines"]["served_by"])
                served[who] = served.get(who, 0) + 1
        return "served by:" + ";".join(f" {who} {n}" for who, n in sorted(served.items())) if served else ""

    def tables(self) -> list[Table]:
        out: list[Table] = []
        for d in SPEC["before_sections"]:
            self._add(d, range(len(self.fields)), {}, out)
        sections: dict[str, list[int]] = {}
        for i, f in enumerate(self.fields):
            sections.setdefault(f["section"], []).append(i)
        for name, cases in sections.items():
            section = {"section_name": name or SPEC["unnamed_section"]}
            layout = next(lay for lay in SPEC["layouts"] if self._fits(lay, cases, section))
            self._add(layout["table"], cases, section, out)
            for d in SPEC["after_section"]:
                if layout["name"] in d["layouts"]:
                    self._add(d, cases, section, out)
        return out

    def _fits(self, layout: dict, cases: list[int], section: dict) -> bool:
        def distinct(name):
            return len({json.dumps(self.fields[i][name]) for i in cases})

        return (("axis" not in layout or distinct(layout["axis"]) > 1)
                and all(distinct(f) == 1 for f in layout.get("fixed", []))
                and all(self.scope(i, section).holds(layout.get("all", "")) for i in cases))

    def _join(self, join: dict, i: int, cases, section: dict):
        found = None
        for j in cases:
            if self.scope(j, section).holds(join.get("where", "")) and all(
                    self.fields[j][theirs] == self.fields[i][ours] for theirs, ours in join["match"].items()):
                found = self.fields[j]
        return found

    def _add(self, d: dict, cases, section: dict, out: list[Table]) -> None:
        picked, seen = [], set()
        for i in cases:
            s = self.scope(i, section)
            key = format_value(s.lookup(d["unique"])) if "unique" in d else None
            if s.holds(d.get("select", "")) and (key is None or key not in seen):
                seen.add(key)
                picked.append(i)
        if not picked:
            return
        if "rows" in d:  # a table per case
            for i in picked:
                if d.get("once") and id(d) in self.shown_once:
                    return
                self.shown_once.add(id(d))
                join = {d["join"]["as"]: self._join(d["join"], i, cases, section)} if "join" in d else {}
                s = self.scope(i, section).with_(join)
                out.append(Table(s.text(d["title"]), list(d["headers"]), right_aligned=list(d.get("right", [])),
                                 rows=[[s.text(c) for c in r["cells"]] for r in d["rows"] if s.holds(r.get("if", ""))],
                                 key=s.text(d["key"])))
            return
        first = self.scope(picked[0], section)
        t = Table(first.text(d["title"]), [], key=first.text(d["key"]))

        def note(s: Scope) -> None:
            line = s.text(d.get("note", ""))
            if line and line not in t.notes:
                t.notes.append(line)

        if "pivot" in d:
            p, cells = d["pivot"], {}
            t.headers = [p["header"]]
            for i in picked:
                column = self.scope(i, section).text(p["columns"])
                if not any(c == column for c, _ in cells):
                    t.headers.append(self.scope(i, section).text(p["column_header"]))
                cells[(column, self.fields[i][p["rows"]])] = i
            t.right_aligned = [True] * len(t.headers)
            for x in sorted({x for _, x in cells}):
                row = [format_value(x)]
                for i in (cells.get((column, x)) for column in dict.fromkeys(c for c, _ in cells)):
                    row.append("" if i is None else self.scope(i, section).text(p["cell"]))
                    if i is not None:
                        note(self.scope(i, section))
                t.rows.append(row)
        else:
            shown = [c for c in d["columns"] if "shown_if_any" not in c
                     or any(self.scope(i, section).holds(c["shown_if_any"]) for i in picked)]
            t.headers, t.right_aligned = [c["header"] for c in shown], [c.get("right", False) for c in shown]
            for i in picked:
                s = self.scope(i, section)
                t.rows.append([s.text(c["cell"]) if s.holds(c.get("when", "")) else "" for c in shown])
                note(s)
        t.chart = self._chart(d["chart"], picked, section, t.title) if "chart" in d else None
        out.append(t)

    def _chart(self, c: dict, picked: list[int], section: dict, title: str) -> Chart | None:
        cases = [i for i in picked if self.scope(i, section).holds(c.get("select", ""))]
        if not cases or not any(self.scope(i, section).holds(c.get("shown_if_any", "")) for i in picked):
            return None
        value = SPEC["chart_value"]
        chart = Chart(c["kind"], self.scope(cases[0], section).text(c["title"]) if "title" in c else title,
                      c.get("x_label", ""), value["label"])
        for i in cases:
            s, median = self.scope(i, section), self.fields[i][value["field"]]
            if c["kind"] == "lines":
                chart.lines.setdefault(s.text(c["line"]), {})[self.fields[i][c["x"]]] = median
            else:
                chart.bars.append((s.text(c["label"]), median))
        return chart


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
        status = [row["status"] for row in self.rows()]
        ok, unsupported = status.count("OK"), status.count("FAILED_PRECONDITION")
        return {"cases": len(status), "ok": ok, "unsupported": unsupported, "failed": len(status) - ok - unsupported}

    def rows(self) -> list[dict[str, Any]]:
        """One dict per case with attn-client's results.csv columns."""
        return [columns(r, SPEC["case_columns"], rep, exported_only=True) for r, rep in zip(self.cases, self.replicas)]

    def to_pandas(self):
        """A DataFrame with a row per case and attn-client's results.csv columns (pandas extra)."""
        try:
            import pandas as pd
        except ImportError as e:
            raise ImportError("Results.to_pandas needs pandas: pip install 'attn_client[pandas]'") from e
        return pd.DataFrame(self.rows(), columns=list(columns(pb.CaseResult(), SPEC["case_columns"], exported_only=True)))

    def tables(self) -> list[Table]:
        """Every table in attn-client's order."""
        return _Report(self).tables()

    def table(self, name: str) -> Table:
        """One table by its key or title: a section by the name the job gave it ("sequence sweep",
        "batch sweep", "MHA/GQA/MQA", "causal sweep", "correctness", "FP8 vs bf16"; "cases" for
        cases without one), or "timing" (the default shape), "causal effect", "fp8" (the FP8
        recipe table), "SECTION numerics" (a checked sweep's)."""
        tables = self.tables()
        for t in tables:
            if name.lower() in (t.key.lower(), t.title.lower()):
                return t
        raise KeyError(f"no table {name!r}; this job has {', '.join(repr(t.key) for t in tables)}")

    def server_line(self) -> str:
        return _Report(self).line("server")

    def summary_line(self) -> str:
        return _Report(self).line("summary")

    def __str__(self) -> str:
        report = _Report(self)
        server, served = report.line("server"), report.served_by()
        return ((server + "\n\n" if server else "") + "".join(str(t) + "\n" for t in report.tables())
                + report.line("summary") + "\n" + (served + "\n" if served else ""))

    def _repr_html_(self) -> str:
        report = _Report(self)
        server = report.line("server")
        head = f"<p>{html.escape(server)}</p>" if server else ""
        return head + "<br>".join(t._repr_html_() for t in report.tables()) + f"<p>{html.escape(report.line('summary'))}</p>"

    def __repr__(self) -> str:
        return f"<Results {self.summary_line()}>"

    def plot(self, section: str | None = None):
        """matplotlib figures of the tables' charts: latency vs sequence length per backend (each
        sequence sweep), vs batch size, the default shape's bars, MHA/GQA/MQA, FP8 vs bf16. A
        list of every one, or the one of the table `section` (as table() names them)."""
        from attn_client.plots import figure

        charts = [(t.key, t.chart) for t in self.tables() if t.chart]
        if section is None:
            return [figure(c) for _, c in charts]
        for key, chart in charts:
            if key.lower() == section.lower():
                return figure(chart)
        raise KeyError(f"no plot {section!r}; this job has {', '.join(repr(k) for k, _ in charts)}")

    @classmethod
    def from_json(cls, source) -> "Results":
        """Results from attn-client's results.json (schema attn.bench.v1): a path, JSON text or the
        parsed dict; so a sweep run with `attn-client bench --out DIR` opens here too."""
        if isinstance(source, (str, pathlib.Path)) and not str(source).lstrip().startswith("{"):
            doc = json.loads(pathlib.Path(source).read_text())
        else:
            doc = json.loads(source) if isinstance(source, str) else source
        if doc.get("schema") != SPEC["schema"]:
            raise ValueError(f"not an {SPEC['schema']} document (schema {doc.get('schema')!r})")
        out = cls(target=doc["target"], command=doc["command"], created=doc["created"],
                  wall_seconds=doc["wall_seconds"] or 0.0)
        fill(out.server, doc["server"], SPEC["server_columns"])
        fill(out.options, doc["options"], SPEC["options_columns"])
        for row in doc["cases"]:
            r = pb.CaseResult()
            fill(r, row, SPEC["case_columns"])
            out.add(r, row.get("replica", ""))
        return out
