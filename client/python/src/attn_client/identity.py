"""The token a Client sends, checked before any call: its characters, and the channel it may cross.

The same rules as attn-client's (client/connection.cc): a token is visible ASCII only (what an
HTTP/2 header carries; a token copied from a chat often brings a newline, a space or a
non-breaking space along), and it goes in plaintext only to a loopback target unless the caller
says so (``insecure_token=True``).
"""
from __future__ import annotations

import ipaddress
import unicodedata

from attn_client.errors import invalid


def _describe(ch: str) -> str:
    names = {"\n": "a newline", "\r": "a carriage return", "\t": "a tab", " ": "a space"}
    if ch in names:
        return names[ch]
    if ord(ch) < 0x20 or ord(ch) == 0x7F:
        return f"the control character U+{ord(ch):04X}"
    name = unicodedata.name(ch, "")
    return f"the non-ASCII character U+{ord(ch):04X}{f' ({name})' if name else ''}"


def check_token(token: str, source: str) -> None:
    """AttnError (INVALID_ARGUMENT) naming the first character that cannot be part of a token:
    whitespace (a trailing newline included), control characters, anything outside ASCII."""
    if token == "":
        raise invalid(f"{source}: empty; give the token you were handed, or no token at all")
    for i, ch in enumerate(token):
        if "\x21" <= ch <= "\x7e":
            continue
        where = "at the end" if i == len(token) - 1 else "at the start" if i == 0 else f"at position {i + 1}"
        raise invalid(f"{source}: has {_describe(ch)} {where} (character {i + 1} of {len(token)}); a token is "
                      f"visible ASCII only: copy it again without the surrounding whitespace")


def _host_of(item: str) -> str:
    host = item.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_loopback(target: str) -> bool:
    """Whether every host of `target` (host:port, a comma list, dns:///name:port) is this machine
    by its name or address: localhost, 127.0.0.0/8 or ::1. Other names count as remote, whatever
    they resolve to."""
    spec = target[4:].lstrip("/") if target.startswith("dns:") else target
    for item in spec.split(","):
        host = _host_of(item)
        if host == "localhost":
            continue
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
        except ValueError:
            return False
    return True


def check_plaintext_token(target: str, tls: bool, token: str | None, insecure_token: bool) -> None:
    """AttnError when a token would cross the network in plaintext to a target that is not
    loopback and the caller did not ask for it with insecure_token=True."""
    if token and not tls and not insecure_token and not is_loopback(target):
        raise invalid(f"refusing to send the token in plaintext to {target}: it is not loopback, so anyone on the "
                      f"network path could read the token and act as you; use TLS (ca_file=CA.pem, "
                      f"$ATTN_TLS_CA_FILE, or tls=True), or pass insecure_token=True if this network is private")
