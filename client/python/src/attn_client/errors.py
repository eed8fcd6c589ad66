"""The one exception type attn_client raises."""
from __future__ import annotations

import grpc


class AttnError(Exception):
    """A call that failed: the gRPC status code and the server's message.

    ``code`` is a ``grpc.StatusCode`` (``code.name`` is "INVALID_ARGUMENT", ...); ``message`` is
    the server's text naming the field and the rule (or gRPC's for a transport failure);
    ``peer`` is the replica that answered, where known. Problems found before any call (an
    array that cannot be sent, a bad target) carry INVALID_ARGUMENT, as the server would.
    """

    def __init__(self, code: grpc.StatusCode, message: str, peer: str = ""):
        self.code = code
        self.message = message
        self.peer = peer
        super().__init__(str(self))

    def __str__(self) -> str:
        # gRPC's own transport messages can span lines; the first says what happened.
        text = f"{self.code.name}: {self.message.splitlines()[0] if self.message else ''}"
        return text + (f" (from {self.peer})" if self.peer else "")

    @classmethod
    def from_rpc(cls, error: grpc.RpcError) -> "AttnError":
        code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
        details = error.details() if hasattr(error, "details") else str(error)
        return cls(code or grpc.StatusCode.UNKNOWN, details or "")


def invalid(message: str) -> AttnError:
    return AttnError(grpc.StatusCode.INVALID_ARGUMENT, message)
