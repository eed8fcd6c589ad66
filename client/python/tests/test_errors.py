"""Every failure is one AttnError carrying the gRPC code and the server's message; targets are
read as attn-client reads --target."""
import socket

import grpc
import numpy as np
import pytest

import attn_client
from attn_client import AttnError
from conftest import needs_cuda


def arrays(b=1, t=8, s=8, n=4, k=4, h=32, dtype=np.float32):
    rng = np.random.default_rng(0)
    return tuple(rng.standard_normal(x).astype(dtype) for x in ((b, t, n, h), (b, s, k, h), (b, s, k, h)))


def test_invalid_argument_carries_the_servers_message(client, server):
    q, k, v = arrays(k=3)
    with pytest.raises(AttnError) as e:
        client.attend(q, k, v)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message == "shape: num_kv_heads: num_heads (4) must be a multiple of num_kv_heads (3) for GQA/MQA"
    assert str(e.value).startswith("INVALID_ARGUMENT: shape: num_kv_heads")


def test_unsupported_backend_is_failed_precondition(client):
    with pytest.raises(AttnError) as e:
        client.attend(*arrays(dtype=np.float16), backend="cudnn")
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert needs_cuda("cudnn").fullmatch(e.value.message)


def test_invalid_scale_and_unknown_suite(client):
    with pytest.raises(AttnError) as e:
        client.attend(*arrays(), scale=-1.0)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "scale" in e.value.message
    with pytest.raises(AttnError) as e:
        client.bench(suite="no-such-suite", progress=False)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "no-such-suite" in e.value.message


@pytest.mark.parametrize("bad, expected", [
    (lambda q, k, v: (q[0], k, v), "q: shape (8, 4, 32) has 3 dimensions; expected 4, (B, T, N, H)"),
    (lambda q, k, v: (q, k, v[:, :4]), "v: shape (1, 4, 4, 32) differs from k's (1, 8, 4, 32)"),
    (lambda q, k, v: (q, k[..., :16], v[..., :16]), "k: shape (1, 8, 4, 16) does not fit q's (1, 8, 4, 32)"),
    (lambda q, k, v: (q.astype(np.float64), k, v), "q, k, v: dtypes float64, float32, float32 differ"),
    (lambda q, k, v: tuple(x.astype(np.float64) for x in (q, k, v)), "q: dtype float64 is not one the service runs"),
    (lambda q, k, v: (object(), k, v), "q: cannot read it as an array"),
])
def test_arrays_that_cannot_be_sent(client, bad, expected):
    with pytest.raises(AttnError) as e:
        client.attend(*bad(*arrays()))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in e.value.message


def test_no_server_is_unavailable():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AttnError) as e:
        attn_client.Client(f"127.0.0.1:{port}", timeout=5).health()
    assert e.value.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


@pytest.mark.parametrize("spec, expected", [
    ("", "empty"),
    ("localhost", "'localhost' is not host:port"),
    ("127.0.0.1:1,", "empty item in the comma list"),
    ("no-such-host.invalid:1,127.0.0.1:2", "'no-such-host.invalid' does not resolve"),
    ("127.0.0.1:1,[::1]:2", "mixes IPv4 and IPv6"),
])
def test_bad_targets(spec, expected):
    with pytest.raises(AttnError) as e:
        attn_client.parse_target(spec) if spec == "" else attn_client.Client(spec)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and expected in e.value.message


def test_targets_as_the_cli_reads_them(server, monkeypatch):
    assert attn_client.parse_target("127.0.0.1:1,127.0.0.2:2") == ("ipv4:127.0.0.1:1,127.0.0.2:2", 2)
    assert attn_client.parse_target("[::1]:1,[::1]:2") == ("ipv6:[::1]:1,[::1]:2", 2)
    assert attn_client.parse_target("attn-server:50051") == ("attn-server:50051", 1)  # left to gRPC
    # dns:/// and a comma list reach the same server; $ATTN_TARGET and $ATTN_TOKEN are the defaults.
    for target in (f"dns:///localhost:{server.port}", f"{server.address},{server.address}"):
        assert attn_client.Client(target).health().serving
    monkeypatch.setenv("ATTN_TARGET", server.address)
    monkeypatch.setenv("ATTN_TOKEN", "secret")
    c = attn_client.Client()
    assert c.target == server.address and c.token == "secret" and c.health().serving
