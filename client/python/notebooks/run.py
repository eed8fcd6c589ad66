#!/usr/bin/env python3
"""Runs a notebook headless (nbclient) against the attn service at $ATTN_TARGET and checks what
it shows: no cell fails, and every table it displays (attn_client.Table's HTML) has rows.

    ATTN_TARGET=host:port python3 client/python/notebooks/run.py [NOTEBOOK] [--out EXECUTED.ipynb]

Prints the wall time, the tables' titles and row counts, and the figures. Exits 1 when a cell
fails or a table is empty. tests/test_notebook.py runs it on the cpu backend; gpu_notebook.sh
on the GPU, beside the JAX notebook cells.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
import time
from dataclasses import dataclass, field

HERE = pathlib.Path(__file__).resolve().parent
TABLE = re.compile(r"(?:<h4[^>]*>(?P<title>.*?)</h4>)?<table class='attn-table'.*?<tbody>(?P<body>.*?)</tbody>", re.S)


@dataclass
class Run:
    wall_seconds: float
    tables: list[tuple[str, int]] = field(default_factory=list)  # (title, rows with a non-empty cell)
    figures: int = 0
    notebook: object = None

    @property
    def empty_tables(self) -> list[str]:
        return [title for title, rows in self.tables if rows == 0]


def _rows(body: str) -> int:
    return sum(1 for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
               if any(cell.strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)))


def execute(path: pathlib.Path, timeout_s: int = 1200) -> Run:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    run = Run(wall_seconds=time.perf_counter() - started, notebook=nb)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            for m in TABLE.finditer(data.get("text/html", "")):
                run.tables.append((m.group("title") or "(untitled)", _rows(m.group("body"))))
            run.figures += "image/png" in data
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebook", nargs="?", default=str(HERE / "codelab.ipynb"))
    parser.add_argument("--out", help="write the executed notebook here")
    args = parser.parse_args()
    run = execute(pathlib.Path(args.notebook))
    if args.out:
        import nbformat

        nbformat.write(run.notebook, args.out)
    for title, rows in run.tables:
        print(f"  {rows:3d} rows  {title}")
    print(f"notebook {args.notebook}: {len(run.tables)} tables ({len(run.empty_tables)} empty), "
          f"{run.figures} figures; wall {run.wall_seconds:.2f} s")
    return 1 if run.empty_tables or not run.tables else 0


if __name__ == "__main__":
    sys.exit(main())
