"""What the client sends for identity, checked before any call, and what it says when a call
fails: a token with a character no header carries is refused naming it; a token goes over
plaintext only to loopback unless insecure_token=True; an upload over the server's size limit is
refused before it is sent; an error carries the server's request id and attn-client's hints."""
import socket
import time

import grpc
import numpy as np
import pytest

import attn_client
from attn_client import AttnError
from conftest import ServerProcess


@pytest.mark.parametrize("token, from_env, expected", [
    ("attn_abc\n", True, "$ATTN_TOKEN: has a newline at the end (character 9 of 9)"),
    ("attn_a\u00a0b", False, "token: has the non-ASCII character U+00A0 (NO-BREAK SPACE) at position 7"),
    ("attn_a b", False, "token: has a space at position 7"),
    ("attn_\x01b", True, "$ATTN_TOKEN: has the control character U+0001 at position 6"),
    (" attn_ab", False, "token: has a space at the start"),
])
def test_a_malformed_token_is_refused_naming_the_character(server, monkeypatch, token, from_env, expected):
    if from_env:
        monkeypatch.setenv("ATTN_TOKEN", token)
    with pytest.raises(AttnError) as e:
        attn_client.Client(server.address, **({} if from_env else {"token": token})).health()
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert expected in e.value.message and "a token is visible ASCII only" in e.value.message


def test_no_token_in_plaintext_to_a_target_that_is_not_loopback(server):
    with pytest.raises(AttnError) as e:
        attn_client.Client("10.255.255.1:50051", token="attn_x")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.message.startswith("refusing to send the token in plaintext to 10.255.255.1:50051: it is not loopback")
    assert "insecure_token=True" in e.value.message
    attn_client.Client("10.255.255.1:50051", token="attn_x", insecure_token=True).close()  # told explicitly
    attn_client.Client("10.255.255.1:50051").close()  # no token, nothing to protect
    for target in (server.address, f"localhost:{server.port}", f"dns:///localhost:{server.port}", f"[::1]:{server.port}"):
        with attn_client.Client(target, token="attn_x", timeout=5) as c:
            if not target.startswith("[::1]"):
                assert c.health().serving


def test_an_upload_over_the_servers_limit_is_refused_before_sending(server_binary, tmp_path):
    s = ServerProcess(server_binary, tmp_path / "server.log",
                      ("--max_request_mib=1", "--max_host_mib=64", "--grpc_memory_mib=64"))
    try:
        q = k = v = np.zeros((1, 1024, 4, 64), np.float32)  # 1 MiB each
        with attn_client.Client(s.address) as c:
            started = time.monotonic()
            with pytest.raises(AttnError) as e:
                c.attend(q, k, v)
            elapsed = time.monotonic() - started
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert ("Attend: q + k + v would be 3.0 MiB, over the server's limit of 1 MiB (its --max_request_mib)"
                in e.value.message)
        assert elapsed < 2.0
        log = s.log_text()
        assert "rpc=Attend" not in log and 'rpc="Attend"' not in log, log
    finally:
        s.stop()


def test_an_error_carries_the_servers_request_id(client, server):
    q = np.zeros((1, 8, 4, 32), np.float32)
    k = v = np.zeros((1, 8, 3, 32), np.float32)
    with pytest.raises(AttnError) as e:
        client.attend(q, k, v)
    assert e.value.request_id.isdigit()
    assert f"request {e.value.request_id})" in str(e.value)
    assert f"id={e.value.request_id} " in server.log_text()


def test_an_unreachable_server_gets_the_clis_hint():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(AttnError) as e:
        attn_client.Client(f"127.0.0.1:{port}", timeout=5).health()
    assert e.value.code == grpc.StatusCode.UNAVAILABLE
    assert e.value.hint.startswith("is attn-server running there")
    assert e.value.hint in str(e.value) and e.value.request_id == ""
