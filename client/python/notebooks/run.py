#!/usr/bin/env python3
"""Runs a notebook headless (nbclient) against the attn service at $ATTN_TARGET and checks what
it shows: no cell fails, and every table it displays (attn_client.Table's HTML) has rows.

    ATTN_TARGET=host:port python3 client/python/notebooks/run.py [NOTEBOOK] [--out EXECUTED.ipynb]
    python3 client/python/notebooks/run.py --server https://HUB/user/NAME --server-token TOKEN [--ca CA.pem]

The kernel is a local one, or with --server one started on that Jupyter server (a participant's
server behind the cohort's JupyterHub, reached with a JupyterHub API token of theirs): the
notebook then runs with that server's environment, its ATTN_TOKEN and ATTN_TARGET.
Prints the wall time, the tables' titles and row counts, and the figures. Exits 1 when a cell
fails or a table is empty. tests/test_notebook.py runs it on the cpu backend; gpu_notebook.sh
on the GPU, beside the JAX notebook cells; tests/deploy/jupyterhub_live.py through JupyterHub.
"""
from __future__ import annotations

import argparse
import os
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


def remote_kernel(server: str, token: str, ca_file: str | None = None):
    """A kernel manager whose kernel runs on the Jupyter server at `server` (its REST API and
    websockets, as Jupyter Server's gateway client speaks them), authenticated with `token`."""
    if ca_file:
        # The gateway client passes its ca_certs to HTTPS requests only beside a client
        # certificate; Tornado's default context (made as it is imported) reads SSL_CERT_FILE.
        os.environ["SSL_CERT_FILE"] = ca_file
    from jupyter_server.gateway.gateway_client import GatewayClient
    from jupyter_server.gateway.managers import GatewayKernelManager

    gateway = GatewayClient.instance()
    gateway.url = server.rstrip("/")
    gateway.ws_url = "ws" + gateway.url[len("http"):]
    gateway.auth_scheme = "token"
    gateway.auth_token = token
    gateway.request_timeout = gateway.connect_timeout = 120.0
    if ca_file:
        gateway.ca_certs = ca_file
    gateway.init_connection_args()
    # The gateway client opens the kernel's websocket without the auth header it sends with its
    # HTTP requests (a gateway without auth is its usual peer); add it.
    import websocket

    create_connection = websocket.create_connection

    def authenticated(url, **kwargs):
        return create_connection(url, header={"Authorization": f"token {token}"}, **kwargs)

    websocket.create_connection = authenticated
    return GatewayKernelManager(kernel_name="python3")


def execute(path: pathlib.Path, timeout_s: int = 1200, km=None) -> Run:
    """Runs every cell of the notebook at `path` on a local kernel, or on `km`'s."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(nb, km=km, timeout=timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
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
    parser.add_argument("--server", help="run the kernel on this Jupyter server (https://HUB/user/NAME)")
    parser.add_argument("--server-token", default="", help="a JupyterHub API token of the server's user")
    parser.add_argument("--ca", help="the CA (PEM) that signed the server's certificate")
    args = parser.parse_args()
    km = remote_kernel(args.server, args.server_token, args.ca) if args.server else None
    run = execute(pathlib.Path(args.notebook), km=km)
    if args.out:
        import nbformat

        nbformat.write(run.notebook, args.out)
    for title, rows in run.tables:
        print(f"  {rows:3d} rows  {title}")
    print(f"notebook {args.notebook}: {len(run.tables)} tables ({len(run.empty_tables)} empty), "
          f"{run.figures} figures; wall {run.wall_seconds:.2f} s")
    rc = 1 if run.empty_tables or not run.tables else 0
    if km is not None:
        # The gateway client's websocket reader is a non-daemon thread that outlives the
        # kernel's shutdown and would keep the process alive: the run is complete, so leave.
        sys.stdout.flush()
        os._exit(rc)
    return rc


if __name__ == "__main__":
    sys.exit(main())
