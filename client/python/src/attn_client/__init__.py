"""attn_client: the attn attention service from Python.

    import attn_client
    client = attn_client.Client()                 # $ATTN_TARGET, else localhost:50051
    out = client.attend(q, k, v, causal=True)     # numpy / JAX / PyTorch in, numpy out
    results = client.bench(suite="codelab")       # the codelab's benchmark job
    results.table("sequence sweep"); results.to_pandas(); results.plot()

All measuring happens on the server; errors raise AttnError with the gRPC code and the
server's message.
"""
from attn_client._proto.attention.v1.attention_pb2 import BackendVerdict, CaseResult, DeviceInfo, Limits
from attn_client.client import AttendInfo, Case, Client, Health, ServerInfo, parse_target
from attn_client.errors import AttnError
from attn_client.reference import Check, check, reference
from attn_client.results import Results
from attn_client.table import Table

__version__ = "0.1.0"

__all__ = ["AttendInfo", "AttnError", "BackendVerdict", "Case", "CaseResult", "Check", "Client", "DeviceInfo", "Health",
           "Limits", "Results", "ServerInfo", "Table", "check", "parse_target", "reference"]
