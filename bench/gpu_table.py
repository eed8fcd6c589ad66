#!/usr/bin/env python3
"""A device call's timings as one table: per shape, each label's minimum over its rounds' medians,
and the subject's speed against every other label (their time / the subject's: >= 1.0 means the
subject is as fast or faster).

Reads attn-bench result lines, optionally tagged "[LABEL] " (bench/gpu_steps.sh's gpu_bench; the
label is the backend's name where untagged), and peers.py's JSON lines (--format jsonl; the
label is the peer's impl). A line that says "skipped: REASON" leaves its cell empty and the
reason is printed under the table.

    python3 bench/gpu_table.py --subject=fused LOG...
"""
import argparse
import json
import re
import sys

OURS = re.compile(
    r"^(?:\[(?P<label>[^\]]+)\] )?(?P<backend>[a-z_0-9]+) +"
    r"B=(?P<B>\d+) T=(?P<T>\d+) S=(?P<S>\d+) N=(?P<N>\d+) K=(?P<K>\d+) H=(?P<H>\d+) (?P<dtype>\w+)"
    r"(?P<causal> causal)?(?P<rest>.*?) +(?:skipped: (?P<why>.*)|(?P<ms>\d+\.\d+))")


def shape_key(b, t, s, n, k, h, causal, rest=""):
    key = f"B{b} T{t} S{s} N{n} K{k} H{h}" + (" causal" if causal else "")
    return key + (" " + rest.strip() if rest.strip() else "")


def read(paths):
    """{shape: {label: min ms}}, the labels and shapes in the order first seen, skip reasons."""
    best, labels, shapes, skipped = {}, [], [], {}

    def put(shape, label, ms):
        if label not in labels:
            labels.append(label)
        if shape not in best:
            shapes.append(shape)
            best[shape] = {}
        if ms is not None:
            best[shape][label] = min(ms, best[shape].get(label, ms))

    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                if line.startswith("{"):
                    row = json.loads(line)
                    shape = shape_key(row["B"], row["T"], row["S"], row["N"], row["K"], row["H"],
                                      row["causal"])
                    put(shape, row["impl"], row.get("median_ms"))
                    if "error" in row:
                        skipped[(row["impl"], shape)] = row["error"]
                    continue
                m = OURS.match(line)
                if not m:
                    continue
                shape = shape_key(m["B"], m["T"], m["S"], m["N"], m["K"], m["H"], m["causal"],
                                  m["rest"])
                label = m["label"] or m["backend"]
                put(shape, label, float(m["ms"]) if m["ms"] else None)
                if m["why"]:
                    skipped[(label, shape)] = m["why"]
    return best, labels, shapes, skipped


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subject", required=True, help="the label the others are compared with")
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    best, labels, shapes, skipped = read(a.logs)
    if not shapes:
        print("gpu_table: no timings in " + ", ".join(a.logs))
        return 1
    if a.subject not in labels:
        print(f"gpu_table: no timings labelled {a.subject!r}; labels: {', '.join(labels)}")
        return 1
    others = [label for label in labels if label != a.subject]
    width = max(len(s) for s in shapes)
    head = [f"{'shape':<{width}}", f"{a.subject:>12}"] + [f"{label:>12}" for label in others]
    head += [f"{'x ' + label:>14}" for label in others]
    print("  ".join(head) + f"    (ms: min over rounds of the medians; x: {a.subject}'s speed)")
    for shape in shapes:
        times = best[shape]
        mine = times.get(a.subject)
        cells = [f"{shape:<{width}}", f"{mine:>12.4f}" if mine else f"{'-':>12}"]
        cells += [f"{times[label]:>12.4f}" if label in times else f"{'-':>12}" for label in others]
        cells += [f"{times[label] / mine:>14.3f}" if mine and label in times else f"{'-':>14}"
                  for label in others]
        print("  ".join(cells))
    reasons = {}
    for (label, shape), why in skipped.items():
        reasons.setdefault((label, why), []).append(shape)
    for (label, why), where in reasons.items():
        print(f"{label}, {len(where)} shape{'s' if len(where) > 1 else ''} "
              f"({where[0]}{', ...' if len(where) > 1 else ''}): {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
