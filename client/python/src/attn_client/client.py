"""Client: one gRPC channel to attn-server, and the service's calls as Python methods."""
from __future__ import annotations

import ipaddress
import math
import os
import socket
import sys
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Iterable

import grpc
import numpy as np

from attn_client import arrays
from attn_client._proto.attention.v1 import attention_pb2 as pb
from attn_client._proto.attention.v1 import attention_pb2_grpc as pb_grpc
from attn_client._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
from attn_client.errors import AttnError, invalid
from attn_client.identity import check_plaintext_token, check_token
from attn_client.results import Results, case_text

DEFAULT_TARGET = "localhost:50051"
# Per-call deadline of info, health and attend when the Client sets none (attn-client's too);
# a benchmark job then has none, so a long sweep is never cut short.
DEFAULT_CALL_TIMEOUT_S = 60.0
ATTENTION_SERVICE = "attention.v1.AttentionService"


# --- what info() and health() return ---------------------------------------------------------

class ServerInfo:
    """GetServerInfo's reply: every field as attention.v1.ServerInfo has it (info.version,
    info.devices[0].name, info.backends, info.limits.max_cases, info.suites, ...; `proto` is the
    message itself), and what a notebook asks of it."""

    def __init__(self, proto: pb.ServerInfo):
        self.proto = proto

    def __getattr__(self, name: str):
        if name == "proto":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.proto, name)

    def __repr__(self) -> str:
        return f"ServerInfo({self.proto.version} on {self.proto.hostname})"

    def supports(self, backend: str, dtype: str | None = None) -> bool:
        """Whether `backend` runs the reference problem (in `dtype`, or in any) on some device."""
        return any(v.supported for v in self._verdicts(backend, dtype))

    def reason(self, backend: str, dtype: str | None = None) -> str:
        """Why `backend` cannot run here ('' when it can, or when the server never heard of it)."""
        if self.supports(backend, dtype):
            return ""
        return next((v.reason for v in self._verdicts(backend, dtype) if v.reason),
                    f"{backend}: not a backend of this server")

    @property
    def gpu(self) -> bool:
        return any(d.kind == "cuda" for d in self.proto.devices) and not self.proto.cpu_fallback

    def _verdicts(self, backend: str, dtype: str | None) -> list[pb.BackendVerdict]:
        want = pb.DType.Value(arrays.dtype_name(dtype).upper()) if dtype else None
        return [v for v in self.proto.backends if v.backend == backend and want in (None, v.dtype)]


@dataclass
class Health:
    """grpc.health.v1 statuses: of the server process ("") and of the attention service."""

    server: str
    attention: str

    @property
    def serving(self) -> bool:
        return self.server == "SERVING" and self.attention == "SERVING"


@dataclass
class AttendInfo:
    """What the server said about one Attend call (seconds spent in the server)."""

    backend: str  # the backend that ran (auto resolved)
    device: int
    hostname: str
    queue_seconds: float
    device_seconds: float
    total_seconds: float
    output: np.ndarray | None = None  # attend_generated(..., output=True) only


# --- benchmark cases ---------------------------------------------------------------------------

@dataclass
class Case:
    """One benchmark case: the problem (the codelab's names), its dtype, mask and backend.
    kv_len and num_kv_heads 0 mean S = T and K = N; kv_lens (B lengths in 1..S, or empty: all S)
    makes batch element b attend to its first kv_lens[b] keys; `section` is the table it goes in."""

    batch: int = 4
    seq_len: int = 128
    num_heads: int = 8
    head_dim: int = 64
    kv_len: int = 0
    num_kv_heads: int = 0
    dtype: str = "bfloat16"
    causal: bool = False
    backend: str = "auto"
    section: str = ""
    kv_lens: list[int] = field(default_factory=list)

    def to_proto(self) -> pb.BenchmarkCase:
        return pb.BenchmarkCase(
            section=self.section,
            shape=pb.Shape(batch=self.batch, q_len=self.seq_len, kv_len=self.kv_len,
                           num_heads=self.num_heads, num_kv_heads=self.num_kv_heads, head_dim=self.head_dim),
            dtype=pb.DType.Value(arrays.dtype_name(self.dtype).upper()),
            causal=self.causal, backend=self.backend, kv_lens=[int(x) for x in self.kv_lens])


# --- targets -----------------------------------------------------------------------------------

def _split_host_port(spec: str, item: str) -> tuple[str, str]:
    host, sep, port = item.rpartition(":")
    if not sep or not host or not port:
        raise invalid(f"target '{spec}': '{item}' is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def _resolve(spec: str, host: str, port: str) -> list[tuple[int, str]]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        infos = []
    out, seen = [], set()
    for family, _, _, _, sockaddr in infos:
        if sockaddr[0] not in seen:
            seen.add(sockaddr[0])
            out.append((family, sockaddr[0]))
    if not out:
        raise invalid(f"target '{spec}': '{host}' does not resolve")
    return out


def parse_target(spec: str) -> tuple[str, int]:
    """(the URI the channel dials, the replicas behind it), as attn-client reads --target:
    host:port (left to gRPC's resolver), a comma list of host:port (each resolved here to its
    first address: one replica per item, one address family), or dns:///name:port (every
    address of the name, with round_robin: the pods behind a headless Service)."""
    if not spec:
        raise invalid("target '': empty; expected host:port, a comma list, or dns:///name:port")
    if spec.startswith("dns:"):
        host, port = _split_host_port(spec, spec[4:].lstrip("/"))
        return spec, len(_resolve(spec, host, port))
    if "," not in spec:
        _split_host_port(spec, spec)
        return spec, 1
    v4, v6 = [], []
    for item in spec.split(","):
        if not item:
            raise invalid(f"target '{spec}': empty item in the comma list")
        host, port = _split_host_port(spec, item)
        family, address = _resolve(spec, host, port)[0]
        if family == socket.AF_INET6 or isinstance(ipaddress.ip_address(address.split("%")[0]), ipaddress.IPv6Address):
            v6.append(f"[{address}]:{port}")
        else:
            v4.append(f"{address}:{port}")
    if v4 and v6:
        raise invalid(f"target '{spec}': mixes IPv4 and IPv6 hosts; gRPC's static lists take one family")
    return ("ipv6:" + ",".join(v6)) if v6 else ("ipv4:" + ",".join(v4)), len(v4) + len(v6)


# --- the client --------------------------------------------------------------------------------

class Client:
    """A connection to attn-server.

    target: host:port, a comma list of host:port, or dns:///name:port (several replicas are
    used round-robin); default $ATTN_TARGET, else localhost:50051. token: sent as
    ``authorization: Bearer <token>`` on every call; default $ATTN_TOKEN (set in each
    participant's notebook server by the cohort's JupyterHub); it must be visible ASCII (a
    stray newline or space is refused with the position). tls: use TLS, with the system's
    roots or ca_file (PEM); ca_file defaults to $ATTN_TLS_CA_FILE (set in the cohort's notebook
    servers), which turns TLS on by itself. insecure_token: a token is sent in plaintext only to
    a loopback target (localhost, 127.0.0.0/8, ::1) unless this is True. timeout: seconds per
    call (a benchmark job: the whole job); None means 60 s for info, health and attend, and for
    bench the longest job the server allows. client_id: a label for your calls within your
    token's participant (without tokens, the server's quotas go by your address).

    So in a cohort notebook ``Client()`` needs no arguments: the target, the token and the CA
    come from the environment.
    """

    def __init__(self, target: str | None = None, token: str | None = None, tls: bool = False,
                 ca_file: str | None = None, timeout: float | None = None, client_id: str = "",
                 insecure_token: bool = False):
        self.target = target or os.environ.get("ATTN_TARGET") or DEFAULT_TARGET
        env_token = os.environ.get("ATTN_TOKEN") or None
        self.token = token if token is not None else env_token
        if self.token is not None:
            check_token(self.token, "token" if token is not None else "$ATTN_TOKEN")
        ca_file = ca_file or os.environ.get("ATTN_TLS_CA_FILE") or None
        self.tls = bool(tls or ca_file)
        check_plaintext_token(self.target, self.tls, self.token, insecure_token)
        self.timeout = timeout
        self.client_id = client_id
        self._limits: pb.Limits | None = None  # the server's, read once for the size check
        uri, self.replicas = parse_target(self.target)
        options = [
            ("grpc.service_config", '{"loadBalancingConfig": [{"round_robin": {}}]}'),
            ("grpc.max_receive_message_length", -1),  # the server enforces its own limits
            ("grpc.max_send_message_length", -1),
        ]
        if self.tls:
            roots = None
            if ca_file:
                with open(ca_file, "rb") as f:
                    roots = f.read()
            self._channel = grpc.secure_channel(uri, grpc.ssl_channel_credentials(root_certificates=roots), options)
        else:
            self._channel = grpc.insecure_channel(uri, options)
        self._stub = pb_grpc.AttentionServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(target={self.target!r}{', token=...' if self.token else ''})"

    # -- plumbing --

    def _metadata(self):
        return (("authorization", f"Bearer {self.token}"),) if self.token else None

    def _unary(self, method, request):
        """One unary call; Ctrl-C cancels it on the server, errors become AttnError."""
        future = method.future(request, timeout=self.timeout or DEFAULT_CALL_TIMEOUT_S,
                               metadata=self._metadata())
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            raise
        except grpc.RpcError as e:
            raise AttnError.from_rpc(e, self.tls) from None

    def _check_size(self, request: pb.AttendRequest, output_bytes: int) -> None:
        """Refuses, before sending, an Attend whose q + k + v (or output) is over the server's
        --max_request_mib: gRPC would otherwise upload it all and then fail with its own message."""
        if self._limits is None:
            self._limits = self._server_info_proto().limits
        limit = self._limits.max_request_bytes
        t = request.tensors
        sent = len(t.q) + len(t.k) + len(t.v)
        for what, size in (("q + k + v", sent), ("the output", output_bytes)):
            if limit and size > limit:
                raise invalid(f"Attend: {what} would be {size / 2**20:.1f} MiB, over the server's limit of "
                              f"{limit / 2**20:.0f} MiB (its --max_request_mib); send fewer or smaller arrays "
                              f"(a smaller batch or sequence), or ask the host to raise --max_request_mib")

    # -- the calls --

    def info(self) -> ServerInfo:
        """Versions, devices, every backend's verdict on each device and dtype, limits, suites."""
        return ServerInfo(self._server_info_proto())

    def _server_info_proto(self) -> pb.ServerInfo:
        return self._unary(self._stub.GetServerInfo, pb.GetServerInfoRequest())

    def health(self) -> Health:
        """grpc.health.v1 of the server ("") and of attention.v1.AttentionService."""
        names = health_pb2.HealthCheckResponse.ServingStatus.Name
        statuses = [names(self._unary(self._health.Check, health_pb2.HealthCheckRequest(service=s)).status)
                    for s in ("", ATTENTION_SERVICE)]
        return Health(*statuses)

    def attend(self, q, k, v, *, causal: bool = False, scale: float | None = None, backend: str = "auto",
               dtype: Any = None, return_info: bool = False, kv_lens: Iterable[int] | None = None):
        """Scaled dot-product attention on the server.

        q is (B, T, N, H), k and v (B, S, K, H): numpy arrays (float32, float16,
        ml_dtypes.bfloat16) or anything with __array__ or __dlpack__ (JAX, PyTorch). The call
        runs in `dtype` (default: q's; the inputs are rounded to it) and the output comes back
        as a numpy array in q's dtype. kv_lens (B ints in 1..S) makes batch element b attend to
        its first kv_lens[b] keys (top-left causal on top, as JAX's key_value_seq_lengths).
        return_info=True returns (output, AttendInfo).
        """
        q, k, v = (arrays.to_numpy(x, name) for x, name in ((q, "q"), (k, "k"), (v, "v")))
        for x, name, layout in ((q, "q", "(B, T, N, H)"), (k, "k", "(B, S, K, H)"), (v, "v", "(B, S, K, H)")):
            if x.ndim != 4:
                raise invalid(f"{name}: shape {x.shape} has {x.ndim} dimensions; expected 4, {layout}")
        if v.shape != k.shape:
            raise invalid(f"v: shape {v.shape} differs from k's {k.shape}; both are (B, S, K, H)")
        if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
            raise invalid(f"k: shape {k.shape} does not fit q's {q.shape}: B and H must match")
        if dtype is None:
            if len({q.dtype, k.dtype, v.dtype}) != 1:
                raise invalid(f"q, k, v: dtypes {q.dtype}, {k.dtype}, {v.dtype} differ; pass dtype= to round all three to one")
            if q.dtype.name not in arrays.DTYPES:
                raise invalid(f"q: dtype {q.dtype} is not one the service runs; pass dtype= "
                              f"({', '.join(arrays.DTYPES)}) to round the inputs to it")
        wire = arrays.dtype_name(dtype if dtype is not None else q.dtype)
        b, t, n, h = q.shape
        request = pb.AttendRequest(
            shape=pb.Shape(batch=b, q_len=t, kv_len=k.shape[1], num_heads=n, num_kv_heads=k.shape[2], head_dim=h),
            dtype=pb.DType.Value(wire.upper()), causal=causal, scale=_scale(scale), backend=backend,
            tensors=pb.Tensors(q=arrays.to_wire(q, wire), k=arrays.to_wire(k, wire), v=arrays.to_wire(v, wire)),
            client_id=self.client_id, kv_lens=_lengths(kv_lens))
        self._check_size(request, q.size * arrays.DTYPES[wire].itemsize)
        response = self._unary(self._stub.Attend, request)
        out = arrays.from_wire(response.output, wire, q.shape)
        if out.dtype != q.dtype:  # the call ran in another dtype: back to the caller's
            out = out.astype(q.dtype)
        return (out, _attend_info(response)) if return_info else out

    def attend_generated(self, batch: int = 4, seq_len: int = 128, num_heads: int = 8, head_dim: int = 64, *,
                         kv_len: int = 0, num_kv_heads: int = 0, dtype: Any = "bfloat16", causal: bool = False,
                         scale: float | None = None, backend: str = "auto", seed: int = 0,
                         output: bool = False, kv_lens: Iterable[int] | None = None) -> AttendInfo:
        """One Attend on inputs the server generates from `seed` (the same on every replica):
        timings only, or with output=True also the output (B, T, N, H) in `dtype`. kv_lens as
        in attend()."""
        wire = arrays.dtype_name(dtype)
        request = pb.AttendRequest(
            shape=pb.Shape(batch=batch, q_len=seq_len, kv_len=kv_len, num_heads=num_heads,
                           num_kv_heads=num_kv_heads, head_dim=head_dim),
            dtype=pb.DType.Value(wire.upper()), causal=causal, scale=_scale(scale), backend=backend,
            generated=pb.GeneratedInputs(seed=seed), omit_output=not output, client_id=self.client_id,
            kv_lens=_lengths(kv_lens))
        response = self._unary(self._stub.Attend, request)
        info = _attend_info(response)
        if output:
            info.output = arrays.from_wire(response.output, wire, (batch, seq_len, num_heads, head_dim))
        return info

    def bench(self, suite: str | None = None, cases: Iterable[Case | dict] | None = None, *, check: bool = False,
              repeats: int | None = None, warmup: int | None = None, budget: float | None = None, seed: int = 0,
              graph: bool = False, autotune: bool = False, device: int = -1, progress: bool = True) -> Results:
        """A benchmark job: a suite the server names ("codelab", "large") or a list of cases
        (Case objects or dicts of Case's fields). The server expands the suite for its device,
        makes the inputs from `seed` and times each case; check=True also compares every
        output with its reference (the numerics columns). Progress is a tqdm bar when tqdm is
        installed (progress=False: none). Ctrl-C cancels the job on the server.
        """
        if (suite is None) == (cases is None):
            raise invalid("bench: name a suite or give cases, not both or neither")
        options = pb.BenchmarkOptions(seed=seed, cuda_graph=graph, check_numerics=check, autotune=autotune)
        for name, value in (("repeats", repeats), ("warmup", warmup), ("case_budget_seconds", budget)):
            if value is not None:
                setattr(options, name, value)
        request = pb.RunBenchmarkRequest(options=options, device=device, client_id=self.client_id)
        if suite is not None:
            request.suite = suite
        else:
            cases = [c if isinstance(c, Case) else Case(**c) for c in cases]
            if not cases:
                raise invalid("bench: cases is empty")
            request.cases.cases.extend(c.to_proto() for c in cases)
        server = self._server_info_proto()
        results = Results(server=server, options=options, target=self.target,
                          command=f"bench({'suite=' + repr(suite) if suite is not None else f'cases=[{len(cases)}]'})")
        started = time.monotonic()
        call = self._stub.RunBenchmark(request, timeout=self.timeout or _longest_job(server), metadata=self._metadata())
        bar = _Progress(progress)
        try:
            for event in call:
                kind = event.WhichOneof("event")
                if kind == "started":
                    bar.start(event.started.total_cases, event.started.device_name)
                elif kind == "case_started":
                    bar.case(event.case_started)
                elif kind == "result":
                    results.add(event.result)
                    bar.done(event.result)
        except KeyboardInterrupt:
            call.cancel()  # the server stops the job at its next chunk
            raise
        except grpc.RpcError as e:
            raise AttnError.from_rpc(e, self.tls) from None
        finally:
            bar.close()
            results.wall_seconds = time.monotonic() - started
        return results


def _longest_job(server: pb.ServerInfo) -> float:
    """A job's deadline when the Client sets none: the longest the server grants (its
    --max_job_seconds, where it says), else a day. A job sent without one would get the server's
    per-call default (60 s), which a whole suite on the cpu backend can outlast."""
    return server.limits.max_job_seconds or 86400.0


def _scale(scale: float | None) -> float:
    if scale is None:
        return 0.0
    if not math.isfinite(scale) or scale <= 0:
        raise invalid(f"scale: {scale} must be finite and > 0 (None: 1/sqrt(H))")
    return float(scale)


def _lengths(kv_lens: Iterable[int] | None) -> list[int]:
    """kv_lens as the wire carries them (the server checks the count and each value's range)."""
    return [] if kv_lens is None else [int(x) for x in np.asarray(kv_lens).reshape(-1)]


def _attend_info(r: pb.AttendResponse) -> AttendInfo:
    return AttendInfo(backend=r.backend, device=r.device, hostname=r.hostname,
                      queue_seconds=r.timings.queue_seconds, device_seconds=r.timings.device_seconds,
                      total_seconds=r.timings.total_seconds)


class _Progress:
    """A tqdm bar (tqdm.auto: a widget in notebooks) when tqdm is importable, else a line per case
    on stderr; nothing with progress=False."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.bar = None
        self.total = 0
        self.count = 0

    def start(self, total: int, device: str) -> None:
        self.total = total
        if not self.enabled:
            return
        try:
            from tqdm.auto import tqdm
        except ImportError:
            print(f"{total} cases on {device}", file=sys.stderr)
            return
        with warnings.catch_warnings():
            # tqdm.auto warns where a notebook lacks ipywidgets, and then draws text instead.
            warnings.simplefilter("ignore")
            self.bar = tqdm(total=total, desc=f"attn bench on {device}", unit="case")

    def case(self, started) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(case_text(pb.CaseResult(case=started.case), "{series} {problem}"), refresh=True)

    def done(self, result) -> None:
        self.count += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        else:
            print(f"[{self.count}/{self.total}] {case_text(result, '{series} {problem}: {status}')}", file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()

