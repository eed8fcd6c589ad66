"""attn-server's Open Inference Protocol (KServe v2) facade, driven by Triton's own tools.

A real attn-server (the cpu backend on 127.0.0.1:0, the port read from its SERVING line as
tests/server_process.h does) answers tritonclient's gRPC client and perf_analyzer
(bench/perf_analyzer.sh). tests/kserve/test.sh sets ATTN_SERVER_BINARY, ATTN_PERF_ANALYZER and
ATTN_PA_RUNTIME.
"""
from __future__ import annotations

import csv
import hashlib
import os
import pathlib
import re
import subprocess
import time
import urllib.request

import grpc
import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as triton
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

REPO = pathlib.Path(__file__).resolve().parents[2]
SERVING = re.compile(r'SERVING listen="127\.0\.0\.1:0 \(port ([0-9]+)\)" metrics="127\.0\.0\.1:0 \(port ([0-9]+)\)"')
TOKEN = "kserve-secret"
# Worst absolute error against the float64 reference of the inputs as sent, per datatype: the
# output's own rounding (for FP32, the cpu backend's float32 arithmetic: tests/engine/tolerances.h).
TOLERANCE = {"FP32": 1e-5, "FP16": 2e-3, "BF16": 1.6e-2}
NUMPY = {"FP32": np.float32, "FP16": np.float16, "BF16": ml_dtypes.bfloat16}


class Server:
    """attn-server --devices=cpu on ports the kernel picks (gRPC and metrics); killed by stop()."""

    def __init__(self, log: pathlib.Path, extra: list[str] | None = None):
        binary = os.environ["ATTN_SERVER_BINARY"]
        argv = [binary, "--listen_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--devices=cpu",
                "--arena_mib=256", *(extra or [])]
        self.log = log
        with open(log, "w") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        self.port = self.metrics_port = 0
        deadline = time.monotonic() + 15
        while not self.port and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.025)
            m = SERVING.search(log.read_text())
            if m:
                self.port, self.metrics_port = int(m.group(1)), int(m.group(2))
        if not self.port:
            self.stop()
            raise RuntimeError(f"attn-server did not serve within 15 s; its log:\n{log.read_text()}")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metric(self, name: str, **labels: str) -> float:
        """A sample of the /metrics scrape; 0 when absent."""
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        total = 0.0
        for line in text.splitlines():
            m = re.match(rf"{name}\{{(.*)\}} (\S+)$", line)
            if m and all(f'{k}="{v}"' in m.group(1) for k, v in labels.items()):
                total += float(m.group(2))
        return total

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("server") / "server.log")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    d = tmp_path_factory.mktemp("token_server")
    (d / "tokens.txt").write_text(f"alice {hashlib.sha256(TOKEN.encode()).hexdigest()}\n")
    (d / "tokens.txt").chmod(0o600)  # attn-server refuses a tokens file others can read
    s = Server(d / "server.log", [f"--tokens_file={d / 'tokens.txt'}"])
    yield s
    s.stop()


@pytest.fixture
def client(server):
    with triton.InferenceServerClient(server.address) as c:
        yield c


def reference(q, k, v, causal, scale=None):
    """Attention in float64, BTNH, GQA by repeating K and V heads; causal top-left aligned."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    n, kv = q.shape[2], k.shape[2]
    k, v = np.repeat(k, n // kv, axis=2), np.repeat(v, n // kv, axis=2)
    s = np.einsum("btnh,bsnh->bnts", q, k) * (scale if scale else 1 / np.sqrt(q.shape[3]))
    if causal:
        t, sl = s.shape[2], s.shape[3]
        s = np.where(np.arange(sl)[None, :] <= np.arange(t)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", p, v)


def inputs(datatype, b=2, t=5, s=7, n=4, kv=2, h=8, seed=0):
    """Q, K, V: normal values in `datatype`'s numpy type."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(NUMPY[datatype]) for shape in ((b, t, n, h), (b, s, kv, h), (b, s, kv, h))]


def infer_inputs(datatype, arrays, names="QKV"):
    result = []
    for name, a in zip(names, arrays):
        i = triton.InferInput(name, list(a.shape), datatype)
        i.set_data_from_numpy(a)  # BF16 as ml_dtypes.bfloat16, as tritonclient takes it
        result.append(i)
    return result


def raw_request(model="attention", shapes=((1, 3, 2, 4), (1, 3, 2, 4), (1, 3, 2, 4)), datatype="FP32",
                names="QKV", sizes=None, parameters=None):
    """A ModelInferRequest built by hand, for what tritonclient itself refuses to send."""
    req = service_pb2.ModelInferRequest(model_name=model)
    for i, (name, shape) in enumerate(zip(names, shapes)):
        req.inputs.add(name=name, datatype=datatype, shape=list(shape))
        nbytes = sizes[i] if sizes else int(np.prod(shape)) * (4 if datatype == "FP32" else 2)
        req.raw_input_contents.append(bytes(nbytes))
    for key, value in (parameters or {}).items():
        req.parameters[key].CopyFrom(value)
    return req


def test_live_ready_and_metadata(client):
    assert client.is_server_live()
    assert client.is_server_ready()
    assert client.is_model_ready("attention")
    assert client.is_model_ready("attention_cpu")
    assert not client.is_model_ready("attention_cudnn")  # no GPU here: its backend cannot run
    meta = client.get_server_metadata()
    assert meta.name == "attn" and meta.version
    model = client.get_model_metadata("attention")
    assert model.versions == ["1"]
    assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
        (n, "BF16", [-1, -1, -1, -1]) for n in "QKV"]
    assert [t.name for t in model.outputs] == ["O"]
    config = client.get_model_config("attention_cpu").config
    assert config.name == "attention_cpu" and config.max_batch_size == 0 and config.backend == "cpu"
    assert [i.name for i in config.input] == ["Q", "K", "V"]
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("bert")
    assert e.value.status() == "StatusCode.NOT_FOUND"
    assert "unknown model 'bert'" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        client.is_model_ready("attention", "2")
    assert e.value.status() == "StatusCode.NOT_FOUND" and "model_version" in e.value.message()


@pytest.mark.parametrize("datatype", ["FP32", "FP16", "BF16"])
@pytest.mark.parametrize("causal", [False, True])
def test_infer_matches_float64_reference(client, datatype, causal):
    arrays = inputs(datatype, seed=1 + causal)
    result = client.infer("attention", infer_inputs(datatype, arrays), parameters={"causal": causal},
                          outputs=[triton.InferRequestedOutput("O")])
    out = result.as_numpy("O")
    assert out.shape == (2, 5, 4, 8)
    assert result.get_output("O").datatype == datatype
    error = np.abs(out.astype(np.float64) - reference(*arrays, causal))
    worst = np.unravel_index(np.argmax(error), error.shape)
    assert error[worst] <= TOLERANCE[datatype], f"{datatype} causal={causal}: worst {error[worst]} at {worst}"
    params = result.get_response().parameters
    assert params["backend"].string_param == "cpu"
    assert params["device_seconds"].double_param > 0


def test_infer_scale_backend_and_typed_contents(server):
    """The scale and backend parameters, and FP32 sent as fp32_contents instead of raw bytes."""
    arrays = inputs("FP32", b=1, t=3, s=3, n=2, kv=1, h=4, seed=3)
    req = service_pb2.ModelInferRequest(model_name="attention", id="r-7")
    for name, a in zip("QKV", arrays):
        t = req.inputs.add(name=name, datatype="FP32", shape=list(a.shape))
        t.contents.fp32_contents.extend(a.ravel().tolist())
    req.parameters["scale"].double_param = 0.25
    req.parameters["backend"].string_param = "cpu"
    with grpc.insecure_channel(server.address) as channel:
        reply = service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(req)
    assert reply.id == "r-7" and reply.model_version == "1"
    out = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).reshape(list(reply.outputs[0].shape))
    np.testing.assert_allclose(out, reference(*arrays, False, scale=0.25), atol=1e-5)


def param(**kw):
    return service_pb2.InferParameter(**kw)


BAD = [
    # (what, request, code, words the message must hold)
    ("unknown input", raw_request(names="QKX"), "INVALID_ARGUMENT", "inputs[2].name: unknown input 'X'"),
    ("input twice", raw_request(names="QKK"), "INVALID_ARGUMENT", "inputs[2].name: input K is given twice"),
    ("integer datatype", raw_request(datatype="INT32"), "INVALID_ARGUMENT", "inputs[0].datatype (Q): must be FP32, FP16 or BF16"),
    ("rank 3", raw_request(shapes=((1, 3, 8), (1, 3, 2, 4), (1, 3, 2, 4))), "INVALID_ARGUMENT",
     "inputs[0].shape (Q): must have 4 dimensions"),
    ("V unlike K", raw_request(shapes=((1, 3, 2, 4), (1, 3, 2, 4), (1, 4, 2, 4))), "INVALID_ARGUMENT",
     "inputs[2].shape (V): [1,4,2,4] must equal K's [1,3,2,4]"),
    ("head dims differ", raw_request(shapes=((1, 3, 2, 4), (1, 3, 2, 8), (1, 3, 2, 8))), "INVALID_ARGUMENT",
     "inputs[1].shape (K)"),
    ("GQA ratio", raw_request(shapes=((1, 3, 4, 4), (1, 3, 3, 4), (1, 3, 3, 4))), "INVALID_ARGUMENT",
     "num_kv_heads"),
    ("short bytes", raw_request(sizes=(96, 95, 96)), "INVALID_ARGUMENT",
     "raw_input_contents[1] (K): 95 bytes, expected 96"),
    ("negative scale", raw_request(parameters={"scale": param(double_param=-1)}), "INVALID_ARGUMENT",
     "parameters.scale: must be finite and > 0"),
    ("unknown parameter", raw_request(parameters={"dropout": param(double_param=0.1)}), "INVALID_ARGUMENT",
     "parameters.dropout: unknown parameter"),
    ("unknown backend", raw_request(parameters={"backend": param(string_param="flash")}), "INVALID_ARGUMENT",
     "parameters.backend: unknown backend 'flash'"),
    ("variant's backend", raw_request(model="attention_cpu", parameters={"backend": param(string_param="naive")}),
     "INVALID_ARGUMENT", "parameters.backend: model 'attention_cpu' runs backend cpu"),
    ("unknown model", raw_request(model="resnet50"), "NOT_FOUND", "model_name: unknown model 'resnet50'"),
    ("backend absent here", raw_request(model="attention_cudnn"), "FAILED_PRECONDITION", "cudnn"),
]


@pytest.mark.parametrize("what,request_,code,words", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_name_the_field(server, what, request_, code, words):
    with grpc.insecure_channel(server.address) as channel:
        with pytest.raises(grpc.RpcError) as e:
            service_pb2_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request_)
    assert e.value.code().name == code, e.value.details()
    assert words in e.value.details()


def test_tritonclient_sees_the_field_too(client):
    """A mismatched datatype through tritonclient's own API: its exception carries code and field."""
    arrays = inputs("FP32", b=1, t=3, s=3, n=2, kv=2, h=4)
    ins = infer_inputs("FP32", arrays[:2]) + infer_inputs("FP16", [arrays[2].astype(np.float16)], names="V")
    with pytest.raises(InferenceServerException) as e:
        client.infer("attention", ins)
    assert e.value.status() == "StatusCode.INVALID_ARGUMENT"
    assert "inputs[2].datatype (V): FP16 differs from Q's FP32" in e.value.message()


def test_oip_requests_have_their_own_rpc_label(server, client):
    before = server.metric("attn_requests_total", rpc="ModelInfer", code="OK")
    client.is_server_live()
    client.infer("attention", infer_inputs("FP32", inputs("FP32", b=1, t=2, s=2, n=1, kv=1, h=4)))
    assert server.metric("attn_requests_total", rpc="ModelInfer", code="OK") == before + 1
    assert server.metric("attn_requests_total", rpc="ServerLive", code="OK") >= 1
    assert server.metric("attn_request_duration_seconds_count", rpc="ModelInfer") >= 1
    assert server.metric("attn_requests_total", rpc="Attend") == 0


def test_tokens_guard_every_oip_rpc(token_server):
    arrays = inputs("FP32", b=1, t=2, s=2, n=1, kv=1, h=4)
    with triton.InferenceServerClient(token_server.address) as c:
        for call in (lambda h: c.is_server_live(headers=h),
                     lambda h: c.infer("attention", infer_inputs("FP32", arrays), headers=h)):
            with pytest.raises(InferenceServerException) as e:
                call(None)
            assert e.value.status() == "StatusCode.UNAUTHENTICATED"
            with pytest.raises(InferenceServerException) as e:
                call({"authorization": "Bearer wrong"})
            assert e.value.status() == "StatusCode.UNAUTHENTICATED"
        auth = {"authorization": f"Bearer {TOKEN}"}
        assert c.is_server_live(headers=auth)
        out = c.infer("attention", infer_inputs("FP32", arrays), headers=auth).as_numpy("O")
    np.testing.assert_allclose(out, reference(*arrays, False), atol=1e-5)
    assert token_server.metric("attn_participant_requests_total", participant="alice", rpc="ModelInfer", code="OK") == 1


def perf_analyzer(server, tmp_path, *flags, check=True):
    out = tmp_path / "perf.csv"
    run = subprocess.run([str(REPO / "bench" / "perf_analyzer.sh"), f"--target={server.address}",
                          "--shape=1,16,2,16", f"--out={out}", *flags,
                          "--", "--stability-percentage=100", "--max-trials=5"],
                         capture_output=True, text=True, timeout=300)
    if not check:
        return run
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    with open(out) as f:
        return list(csv.DictReader(f)), run.stdout


def test_perf_analyzer_sweeps_concurrency_without_errors(server, tmp_path):
    errors_before = sum(server.metric("attn_requests_total", rpc="ModelInfer", code=c)
                        for c in ("INVALID_ARGUMENT", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL"))
    ok_before = server.metric("attn_requests_total", rpc="ModelInfer", code="OK")
    rows, stdout = perf_analyzer(server, tmp_path, "--concurrency=1,2", "--requests=300")
    assert [int(r["Concurrency"]) for r in rows] == [1, 2], stdout
    assert all(float(r["Inferences/Second"]) > 0 and float(r["p99 latency"]) > 0 for r in rows), rows
    assert "error" not in stdout.lower(), stdout
    # Exactly --requests a level (perf_analyzer --request-count), and each level's peak memory shown.
    assert stdout.count("Request count: 300") == 2, stdout
    peaks = [int(m) for m in re.findall(r"perf_analyzer: peak RSS ([0-9]+) MiB", stdout)]
    assert len(peaks) == 2 and all(0 < p < 1024 for p in peaks), stdout
    assert server.metric("attn_requests_total", rpc="ModelInfer", code="OK") >= ok_before + 600
    errors_after = sum(server.metric("attn_requests_total", rpc="ModelInfer", code=c)
                       for c in ("INVALID_ARGUMENT", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL"))
    assert errors_after == errors_before


def test_perf_analyzer_with_a_token(token_server, tmp_path):
    # Time windows (--requests=0), perf_analyzer's stabilising mode, with a token.
    rows, _ = perf_analyzer(token_server, tmp_path, "--concurrency=1", f"--token={TOKEN}", "--model=attention_cpu",
                            "--requests=0", "--window_ms=1000")
    assert len(rows) == 1 and float(rows[0]["Inferences/Second"]) > 0


@pytest.mark.parametrize("guard, words", [
    (["--max_rss_mib=1"], "its resident memory passed --max_rss_mib=1"),
    (["--requests=0", "--window_ms=20000", "--timeout_s=2"], "it ran past --timeout_s=2"),
])
def test_perf_analyzer_guards_stop_a_run(server, tmp_path, guard, words):
    """A level past its memory or time guard is killed and reported; the next level still runs."""
    started = time.monotonic()
    run = perf_analyzer(server, tmp_path, "--concurrency=1,2", *guard, check=False)
    assert run.returncode == 1, run.stdout[-4000:] + run.stderr[-4000:]
    assert run.stderr.count(f"perf_analyzer killed: {words}") == 2, run.stderr
    assert "perf_analyzer failed at concurrency 1 2" in run.stderr, run.stderr
    assert time.monotonic() - started < 30
