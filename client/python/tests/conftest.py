"""A real attn-server on loopback for the tests, as the C++ end-to-end tests start it
(tests/server_process.h): the cpu backend on 127.0.0.1:0, the port read from the SERVING line.

The binary is $ATTN_SERVER_BINARY (client/python/test.sh sets it) or --attn-server=PATH.
"""
from __future__ import annotations

import os
import pathlib
import re
import subprocess
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = REPO / "tests" / "client" / "golden"
SERVING = re.compile(r'SERVING listen="127\.0\.0\.1:0 \(port ([0-9]+)\)')


def needs_cuda(backend: str, prefix: str = "") -> re.Pattern:
    """The whole refusal of a GPU backend on the tests' cpu server, `prefix` before it: a server
    built without CUDA adds why (as tests/server/server_test.cc allows for the C++ tests)."""
    return re.compile(re.escape(f"{prefix}{backend}: needs a CUDA device") + "(; this engine was built without CUDA)?")


def pytest_addoption(parser):
    parser.addoption("--attn-server", default=os.environ.get("ATTN_SERVER_BINARY", ""),
                     help="attn-server binary (default: $ATTN_SERVER_BINARY)")


class ServerProcess:
    """attn-server --devices=cpu on a port the kernel picks, with `extra` flags; killed by stop()."""

    def __init__(self, binary: str, log: pathlib.Path, extra: tuple[str, ...] = ()):
        self.log = log
        argv = [binary, "--listen_address=127.0.0.1:0", "--metrics_address=", "--devices=cpu", "--arena_mib=256", *extra]
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.port = 0
        deadline = time.monotonic() + 10
        while not self.port and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.025)
            m = SERVING.search(log.read_text())
            if m:
                self.port = int(m.group(1))
        if not self.port:
            self.stop()
            raise RuntimeError(f"attn-server did not serve within 10 s; its log:\n{log.read_text()}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def server_binary(pytestconfig) -> str:
    binary = pytestconfig.getoption("--attn-server")
    if not binary or not os.access(binary, os.X_OK):
        pytest.fail(f"no attn-server binary (got {binary!r}): set ATTN_SERVER_BINARY or --attn-server")
    return binary


@pytest.fixture(scope="session")
def server(server_binary, tmp_path_factory):
    s = ServerProcess(server_binary, tmp_path_factory.mktemp("server") / "server.log")
    yield s
    s.stop()


@pytest.fixture
def own_server(server_binary, tmp_path):
    """A server of the test's own, for tests that hold its worker (cancel)."""
    s = ServerProcess(server_binary, tmp_path / "server.log")
    yield s
    s.stop()


@pytest.fixture
def client(server):
    import attn_client

    with attn_client.Client(server.address) as c:
        yield c
