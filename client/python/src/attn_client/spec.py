"""The report's one definition, attn's client/report_spec.json (packaged here; attn-client
compiles in the same file), and what reads it by the rules its "about" states, as attn-client's
report_spec.cc does: a message's fields as the spec's columns, texts with placeholders and
conditions, and the formats of numbers."""
from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import grpc

SPEC = json.loads(resources.files("attn_client").joinpath("report_spec.json").read_text(encoding="utf-8"))
_CODES = {c.value[0]: c.name for c in grpc.StatusCode}
_PLACEHOLDER = re.compile(r"\{([^{}:]*):?([^{}]*)\}")


# --- a message's columns -----------------------------------------------------------------------

def columns(msg, spec: list, replica: str = "", exported_only: bool = False) -> dict[str, Any]:
    """`msg`'s values by the spec's column definitions `spec`, in order."""
    out = {}
    for col in spec:
        if "present" in col:  # a group: None unless the message has that field
            has = msg.HasField(col["present"])
            out.update({c["name"]: _value(msg, c, replica, exported_only) if has else None for c in col["columns"]})
        elif not exported_only or col.get("export", True):
            out[col["name"]] = _value(msg, col, replica, exported_only)
    return out


def _walk(msg, path: str):
    *parents, name = path.split(".")
    for p in parents:
        msg = getattr(msg, p)
    return msg, name


def _value(msg, col: dict, replica: str, exported_only: bool):
    if col["path"] == "@replica":
        return replica
    at, name = _walk(msg, col["path"])
    if col.get("optional") and not at.HasField(name):
        return None
    v = getattr(at, name)
    if "columns" in col:  # repeated messages; "unique": the first per value of that column
        rows, key = [columns(m, col["columns"], "", exported_only) for m in v], col.get("unique")
        return [r for n, r in enumerate(rows) if key is None or r[key] not in [p[key] for p in rows[:n]]]
    if not isinstance(v, (bool, int, float, str)):  # repeated scalars
        return list(v)
    if "zero" in col and v == 0:
        v = _value(msg, {"path": col["zero"]}, "", False)
    if "empty" in col and v == "":
        v = col["empty"]
    if col.get("as") == "enum":
        v = at.DESCRIPTOR.fields_by_name[name].enum_type.values_by_number[v].name.lower() if v else "unspecified"
    elif col.get("as") == "code":
        v = _CODES.get(v, "UNKNOWN")
    return v


def fill(msg, row: dict, spec: list) -> None:
    """The inverse of columns(): `row` (as results.json holds it) into `msg`."""
    for col in spec:
        if "present" in col:
            if any(row.get(c["name"]) is not None for c in col["columns"]):
                fill(msg, row, col["columns"])
            continue
        if col["path"] == "@replica" or col["name"] not in row:
            continue
        v, (at, name) = row[col["name"]], _walk(msg, col["path"])
        f = at.DESCRIPTOR.fields_by_name[name]
        if "columns" in col:
            for item in v:
                fill(getattr(at, name).add(), item, col["columns"])
        elif v is None:  # a number JSON cannot carry (NaN), or an unset optional
            if f.cpp_type == f.CPPTYPE_DOUBLE and not col.get("optional"):
                setattr(at, name, float("nan"))
        elif col.get("as") == "enum":
            setattr(at, name, f.enum_type.values_by_name[v.upper()].number if v != "unspecified" else 0)
        else:
            setattr(at, name, grpc.StatusCode[v].value[0] if col.get("as") == "code" else v)


# --- texts -------------------------------------------------------------------------------------

def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _plain(v) -> str:
    """As attn-client writes a value without a format: JSON's text but for strings and floats."""
    if isinstance(v, str):
        return v
    return "" if v is None else "%g" % v if isinstance(v, float) else json.dumps(v, separators=(",", ":"))


def kv_lens_label(lens) -> str:
    """The engine's KvLensLabel: "[1,5,8192]" up to 8, else "[1..8192] ragged" or "[all 4096]"."""
    lens = list(lens)
    if len(lens) <= 8:
        return "[" + ",".join(str(x) for x in lens) + "]" if lens else ""
    return f"[all {lens[0]}]" if min(lens) == max(lens) else f"[{min(lens)}..{max(lens)}] ragged"


def format_value(v, fmt: str = "") -> str:
    """`v` as the spec's format `fmt` writes it ("": plain text)."""
    if v is None or not fmt:
        return _plain(v)
    if fmt == "kv_lens":
        return kv_lens_label(v)
    if fmt == "names":
        return ", ".join(_plain(x["name"]) for x in v)
    if fmt == "capitalized":
        s = _plain(v)
        return s[:1].upper() + s[1:] if s[:1].isascii() else s
    spec = SPEC["formats"].get(fmt)
    if spec is None or not _number(v):
        return _plain(v)
    steps = [[None, spec]] if isinstance(spec, str) else spec
    conversion = next((c for bound, c in steps if bound is None or v >= bound), "")
    return conversion % v if "%" in conversion else conversion


def _compare(a, op: str, b) -> bool:
    if a is None or b is None:
        both = a is None and b is None
        return both if op == "==" else (not both) if op == "!=" else False
    if (_number(a) and _number(b)) or (isinstance(a, str) and isinstance(b, str)):
        order = (a > b) - (a < b)
    else:
        order = 0 if a == b else 2  # unordered: different kinds, or booleans
    if op in ("==", "!="):
        return (order == 0) == (op == "==")
    return order != 2 and {"<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[op]


class Scope:
    """Where texts and conditions look fields up: dicts searched in order, then the labels."""

    def __init__(self, *layers: dict):
        self.layers = layers

    def with_(self, layer: dict) -> "Scope":
        return Scope(layer, *self.layers)

    def lookup(self, path: str):
        if "/" in path:
            a, b = (self.lookup(p) for p in path.split("/", 1))
            return a / b if _number(a) and _number(b) and b else None
        head, *rest = path.split(".")
        for layer in self.layers:
            if head in layer:
                v = layer[head]
                for part in rest:
                    if isinstance(v, dict) and part in v:
                        v = v[part]
                    elif isinstance(v, list) and part.isdigit() and int(part) < len(v):
                        v = v[int(part)]
                    else:
                        return None
                return v
        return self.text(SPEC["labels"][path]) if path in SPEC["labels"] else None

    def text(self, t) -> str:
        if isinstance(t, list):
            return "".join(self.text(p) for p in t)
        if isinstance(t, dict):
            return self.text(t["then"] if self.holds(t["if"]) else t.get("else", ""))
        return _PLACEHOLDER.sub(lambda m: format_value(self.lookup(m[1]), m[2]), t)

    def holds(self, condition: str) -> bool:
        any_ = " or " in condition
        clauses = [c.strip() for c in condition.split(" or " if any_ else " and ")] if condition else []
        return (any if any_ else all)(self._clause(c) for c in clauses)

    def _clause(self, clause: str) -> bool:
        if " " not in clause:
            negated = clause.startswith("!")
            return bool(self.lookup(clause[negated:])) != negated
        lhs, op, rhs = clause.split(" ", 2)
        literals = {"true": True, "false": False, "null": None}
        if rhs[:1] == "'" and rhs[-1:] == "'" and len(rhs) >= 2:
            value = rhs[1:-1]
        elif rhs in literals:
            value = literals[rhs]
        else:
            try:
                value = float(rhs)
            except ValueError:
                value = self.lookup(rhs)
        return _compare(self.lookup(lhs), op, value)
