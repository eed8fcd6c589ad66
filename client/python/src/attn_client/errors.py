"""The one exception type attn_client raises."""
from __future__ import annotations

import grpc


class AttnError(Exception):
    """A call that failed: the gRPC status code, the server's message, and what to try.

    ``code`` is a ``grpc.StatusCode`` (``code.name`` is "INVALID_ARGUMENT", ...); ``message`` is
    the server's text naming the field and the rule (or gRPC's for a transport failure);
    ``request_id`` is the id of the server's log line for the call (its ``x-request-id``
    trailing metadata; "" when no server answered), to quote to the host; ``hint`` says what to
    fix where the failure has a usual cause (TLS on one side only, an untrusted certificate, no
    server there, a deadline), as attn-client's one-line errors do; ``peer`` is the replica that
    answered, where known. Problems found before any call (an array that cannot be sent, a bad
    target or token, a request over the server's size limit) carry INVALID_ARGUMENT, as the
    server would.
    """

    def __init__(self, code: grpc.StatusCode, message: str, peer: str = "", request_id: str = "",
                 hint: str = ""):
        self.code = code
        self.message = message
        self.peer = peer
        self.request_id = request_id
        self.hint = hint
        super().__init__(str(self))

    def __str__(self) -> str:
        # gRPC's own transport messages can span lines; the first says what happened.
        text = f"{self.code.name}: {self.message.splitlines()[0] if self.message else ''}"
        if self.hint:
            text += f"; {self.hint}"
        where = [f"from {self.peer}"] if self.peer else []
        where += [f"request {self.request_id}"] if self.request_id else []
        return text + (f" ({', '.join(where)})" if where else "")

    @classmethod
    def from_rpc(cls, error: grpc.RpcError, tls: bool = False) -> "AttnError":
        """The AttnError of a failed call; `tls` says whether the channel spoke TLS (for the hint)."""
        code = (error.code() if hasattr(error, "code") else None) or grpc.StatusCode.UNKNOWN
        details = (error.details() if hasattr(error, "details") else str(error)) or ""
        request_id = ""
        if hasattr(error, "trailing_metadata"):
            request_id = next((str(v) for k, v in error.trailing_metadata() or () if k == "x-request-id"), "")
        return cls(code, details, request_id=request_id, hint=rpc_hint(code, details, tls))


def rpc_hint(code: grpc.StatusCode, message: str, tls: bool) -> str:
    """What to fix for a failure with a usual cause ("" for the others): the same diagnosis as
    attn-client's (client/connection.cc), in the Python API's words."""
    first = message.splitlines()[0] if message else ""
    handshake = any(w in first for w in ("Handshake", "SSL", "ssl", "certificate"))
    if code == grpc.StatusCode.UNAVAILABLE and tls and handshake:
        return ("the TLS handshake failed: give the CA that signed the server's certificate as ca_file= "
                "(or $ATTN_TLS_CA_FILE) and a target host the certificate names (or tls=False for a plaintext server)")
    if code == grpc.StatusCode.UNAVAILABLE and not tls and any(
            w in first for w in ("Socket closed", "reset", "failed to connect")):
        return ("is attn-server running there, and does it speak TLS? (check the target; for a TLS server "
                "pass tls=True or ca_file=CA.pem)")
    if code == grpc.StatusCode.UNAVAILABLE and "shutting down" not in first and "queue" not in first:
        return "is attn-server running there? (check the target)"
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return "raise the Client's timeout= for long calls"
    return ""


def invalid(message: str) -> AttnError:
    return AttnError(grpc.StatusCode.INVALID_ARGUMENT, message)
