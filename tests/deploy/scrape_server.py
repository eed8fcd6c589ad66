#!/usr/bin/env python3
"""Runs attn-server as the Deployment runs it and checks it the way Kubernetes and Prometheus will.

  scrape_server.py BINARY --flagfile deploy/base/attn-server.flags --render RENDER.yaml --out SCRAPE

1. Starts BINARY with the ConfigMap's flag file, overridden only where a CI machine differs from
   an L4 node (loopback addresses with free ports, the cpu backend, a small arena, text logs).
   Where the flag file turns on TLS and tokens, the host's scripts (scripts/make-cohort-ca.sh,
   scripts/mint-tokens.sh) make a CA, a certificate and tokens here, laid out as the kubelet lays
   out a Secret volume (files behind a ..data symlink), and the flags point there instead of the
   pod's /etc/attn/tls and /etc/attn/tokens.
2. Asks grpc.health.v1 about the service names the Deployment's probes use (read from RENDER, a
   `kubectl kustomize` of deploy/), on the port the probes ask (--health_address's plaintext port
   where the gRPC port speaks TLS): start-up, liveness and readiness must all be SERVING.
3. With TLS and tokens: a plaintext client is refused, a call without a token is UNAUTHENTICATED,
   and the calls below go over TLS (checking the certificate against the CA, for the Service's
   name) with a participant's token.
   Makes one Attend and one RunBenchmark, so that the histogram and counter series exist, and
   writes GET /metrics to SCRAPE (the real scrape deploy-check compares the dashboard and rules
   with). With tokens: a participant added by mint-tokens.sh and swapped into the Secret volume as
   the kubelet swaps it is let in within 15 s, without a restart.
4. SIGTERM while a benchmark job runs: readiness must go NOT_SERVING while liveness stays
   SERVING, the job must still finish, and the process must exit 0 within the Deployment's
   terminationGracePeriodSeconds.
5. Starts BINARY again asking for GPU 0 (--devices=0): on a machine without an NVIDIA driver this
   is the "GPU unusable" state of a node whose driver is too old. The start-up and liveness
   probes must still see SERVING (else Kubernetes restarts the pod in a loop) and readiness
   NOT_SERVING. Skipped, with the reason, on a machine where GPU 0 works.

Prints one line per step and a summary last; exits 1 on the first failure. Every server it
started is killed on the way out, whatever happened.
"""
import argparse
import atexit
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import yaml

SERVING, NOT_SERVING = 1, 2
STATUS_NAMES = {0: "UNKNOWN", SERVING: "SERVING", NOT_SERVING: "NOT_SERVING"}
STARTED = []  # every attn-server process started here


@atexit.register
def _kill_leftovers():
    for proc in STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def probe_services(render):
    """The grpc.health.v1 service name each probe of the attn-server container asks about."""
    for doc in yaml.safe_load_all(open(render)):
        if doc and doc.get("kind") == "Deployment" and doc["metadata"]["name"] == "attn-server":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if c["name"] == "attn-server":
                    out = {}
                    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                        grpc_probe = (c.get(probe) or {}).get("grpc")
                        if grpc_probe is None:
                            fail(f"{probe} is not a gRPC probe in {render}")
                        out[probe] = grpc_probe.get("service", "")
                    return out
    fail(f"no attn-server Deployment in {render}")


def stubs(proto_root, work):
    from grpc_tools import protoc
    rc = protoc.main(["protoc", f"-I{proto_root}", f"--python_out={work}", f"--grpc_python_out={work}",
                      str(pathlib.Path(proto_root) / "attention/v1/attention.proto")])
    if rc != 0:
        fail("grpc_tools.protoc could not compile proto/attention/v1/attention.proto")
    sys.path.insert(0, str(work))
    from attention.v1 import attention_pb2, attention_pb2_grpc
    return attention_pb2, attention_pb2_grpc


ROOT = pathlib.Path(__file__).resolve().parents[2]


def read_flags(path):
    flags = {}
    for line in pathlib.Path(path).read_text().splitlines():
        line = line.strip()
        if line.startswith("--"):
            name, _, value = line[2:].partition("=")
            flags[name] = value
    return flags


def secret_volume(directory, files):
    """Writes `files` (name -> source path) into `directory` as the kubelet's atomic writer lays
    out a Secret volume: a timestamped folder, `..data` pointing at it, and each name a symlink
    through `..data`. An update makes a new folder and swaps `..data` in one rename, so a reader
    that watches the file's own inode never sees the change; attn-server must see it."""
    directory.mkdir(parents=True, exist_ok=True)
    stamp = directory / f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}.{time.monotonic_ns()}"
    stamp.mkdir()
    for name, src in files.items():
        shutil.copyfile(src, stamp / name)
        os.chmod(stamp / name, 0o440)  # the Deployment's defaultMode (attn-server refuses more)
        if not (directory / name).is_symlink():
            os.symlink(f"..data/{name}", directory / name)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    os.symlink(stamp.name, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", directory / "..data")
    if old:
        shutil.rmtree(directory / old)


class Identity:
    """The cohort's TLS and tokens for a local run: the host's scripts into `work`, files laid out
    as Secret volumes, the flags that point there, and channel credentials and call metadata."""

    def __init__(self, flags, work, authority):
        self.tls = bool(flags.get("tls_cert_file"))
        self.tokens = bool(flags.get("tokens_file"))
        self.work, self.authority = work, authority
        self.flags, self.token, self.admin = [], None, None
        if self.tls:
            run([ROOT / "scripts/make-cohort-ca.sh", work / "host-tls"])
            secret_volume(work / "tls", {"tls.crt": work / "host-tls/tls.crt", "tls.key": work / "host-tls/tls.key"})
            self.ca = (work / "host-tls/ca.crt").read_bytes()
            self.flags += [f"--tls_cert_file={work}/tls/tls.crt", f"--tls_key_file={work}/tls/tls.key"]
        if self.tokens:
            run([ROOT / "scripts/mint-tokens.sh", work / "host-tokens", "ada", "--admin", "host"])
            secret_volume(work / "tokens", {"tokens.txt": work / "host-tokens/tokens.txt"})
            handed = self.handout()
            self.token, self.admin = handed["ada"], handed["host"]
            self.flags.append(f"--tokens_file={work}/tokens/tokens.txt")
        if flags.get("health_address"):
            self.flags.append("--health_address=127.0.0.1:0")

    def handout(self):
        return dict(line.split() for line in (self.work / "host-tokens/handout.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#"))

    def add_participant(self, name):
        """mint-tokens.sh adds `name`; the Secret volume is updated as the kubelet would; its token."""
        run([ROOT / "scripts/mint-tokens.sh", self.work / "host-tokens", name])
        secret_volume(self.work / "tokens", {"tokens.txt": self.work / "host-tokens/tokens.txt"})
        return self.handout()[name]

    def channel(self, port):
        import grpc
        if not self.tls:
            return grpc.insecure_channel(f"127.0.0.1:{port}")
        return grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(root_certificates=self.ca),
                                   [("grpc.ssl_target_name_override", self.authority)])

    def metadata(self, token=""):
        token = token or self.token
        return (("authorization", f"Bearer {token}"),) if token else None


def run(cmd):
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        fail(f"{' '.join(str(c) for c in cmd)} failed:\n{done.stdout}{done.stderr}")


class Server:
    def __init__(self, args, extra, log_path):
        self.log_path = log_path
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen([args.binary, f"--flagfile={args.flagfile}", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        STARTED.append(self.proc)
        self.grpc_port = self.metrics_port = self.health_port = None
        self.serving = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.serving is None:
            if self.proc.poll() is not None:
                fail(f"attn-server exited with {self.proc.returncode} before serving:\n{self.text()}")
            m = re.search(r'^\S+ \S+ \[\w+\] (NOT_SERVING|SERVING) listen="[^"]*\(port (\d+)\)" '
                          r'metrics="(?:off|[^"]*\(port (\d+)\))"', self.text(), re.M)
            if m:
                self.serving = m.group(1) == "SERVING"
                self.grpc_port = int(m.group(2))
                self.metrics_port = int(m.group(3)) if m.group(3) else None
                line = self.text()[m.start():].split("\n", 1)[0]
                h = re.search(r'health="[^"]*\(port (\d+), plaintext\)"', line)
                # Kubernetes' probes ask the plaintext health port where there is one.
                self.health_port = int(h.group(1)) if h else self.grpc_port
            else:
                time.sleep(0.05)
        if self.serving is None:
            fail(f"no SERVING or NOT_SERVING line within 60 s:\n{self.text()}")

    def text(self):
        return pathlib.Path(self.log_path).read_text()

    def health(self, service):
        import grpc
        request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
        with grpc.insecure_channel(f"127.0.0.1:{self.health_port}") as channel:
            check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                        request_serializer=lambda b: b, response_deserializer=lambda b: b)
            try:
                reply = check(request, timeout=5)
            except grpc.RpcError as e:
                return f"error {e.code().name}"
        return STATUS_NAMES.get(reply[1] if len(reply) == 2 and reply[0] == 0x08 else 0, "UNKNOWN")

    def stop(self, timeout):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail(f"attn-server did not exit within {timeout} s of SIGTERM:\n{self.text()[-2000:]}")


def authority(render):
    """The name a client in the cluster uses for attn-server: its ClusterIP Service's full name."""
    for doc in yaml.safe_load_all(open(render)):
        if doc and doc.get("kind") == "Service" and (doc.get("spec") or {}).get("clusterIP") != "None" \
                and (doc["spec"].get("selector") or {}).get("app.kubernetes.io/name") == "attn-server":
            return f'{doc["metadata"]["name"]}.{doc["metadata"].get("namespace", "default")}.svc.cluster.local'
    fail(f"no attn-server ClusterIP Service in {render}")


def expect_health(server, probes, want, when):
    for probe, service in probes.items():
        got = server.health(service)
        if got != want[probe]:
            fail(f"{when}: {probe} asks health service {service!r}: {got}, expected {want[probe]}")
    return ", ".join(f"{p} ({s!r}) {want[p]}" for p, s in probes.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--flagfile", required=True)
    ap.add_argument("--render", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--proto", default=str(pathlib.Path(__file__).resolve().parents[2] / "proto"))
    args = ap.parse_args()

    probes = probe_services(args.render)
    grace = 30
    for doc in yaml.safe_load_all(open(args.render)):
        if doc and doc.get("kind") == "Deployment":
            grace = doc["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", grace)
    work = pathlib.Path(tempfile.mkdtemp(prefix="attn-scrape-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    pb, pb_grpc = stubs(args.proto, work)
    import grpc

    ident = Identity(read_flags(args.flagfile), work, authority(args.render))
    local = ["--listen_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0", "--arena_mib=256",
             "--log_format=text"] + ident.flags
    # 1-4: the serving replica.
    server = Server(args, local + ["--devices=cpu"], work / "serving.log")
    if not server.serving:
        fail(f"attn-server on the cpu backend is NOT_SERVING:\n{server.text()}")
    all_serving = {p: "SERVING" for p in probes}
    print(f"health while serving (port {server.health_port}"
          f"{', plaintext beside the TLS gRPC port' if server.health_port != server.grpc_port else ''}): "
          + expect_health(server, probes, all_serving, "serving"))

    shape = pb.Shape(batch=1, q_len=16, num_heads=2, head_dim=16)
    attend = pb.AttendRequest(shape=shape, dtype=pb.FLOAT32, backend="cpu", generated=pb.GeneratedInputs(seed=1))
    if ident.tls:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            try:
                pb_grpc.AttentionServiceStub(channel).Attend(attend, timeout=5, metadata=ident.metadata())
                fail("a plaintext client's Attend succeeded on the TLS port")
            except grpc.RpcError as e:
                print(f"plaintext client on the TLS port: refused ({e.code().name})")
    if ident.tokens:
        with ident.channel(server.grpc_port) as channel:
            try:
                pb_grpc.AttentionServiceStub(channel).Attend(attend, timeout=10)
                fail("an Attend without a token succeeded")
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.UNAUTHENTICATED:
                    fail(f"an Attend without a token: {e.code().name} {e.details()}, expected UNAUTHENTICATED")
        print("an Attend without a token: UNAUTHENTICATED")

    with ident.channel(server.grpc_port) as channel:
        stub = pb_grpc.AttentionServiceStub(channel)
        reply = stub.Attend(attend, timeout=30, metadata=ident.metadata())
        if reply.backend != "cpu" or len(reply.output) != 16 * 2 * 16 * 4:
            fail(f"Attend: backend {reply.backend!r}, {len(reply.output)} output bytes")
        job = pb.RunBenchmarkRequest(
            cases=pb.CaseList(cases=[pb.BenchmarkCase(section="deploy-check", shape=shape, dtype=pb.FLOAT32,
                                                      backend="cpu")]),
            options=pb.BenchmarkOptions(warmup=1, repeats=3))
        results = [e.result for e in stub.RunBenchmark(job, timeout=60, metadata=ident.metadata()) if e.HasField("result")]
        # CaseResult.status is a google.rpc.Code number: 0 is OK.
        if [r.status for r in results] != [grpc.StatusCode.OK.value[0]]:
            fail(f"RunBenchmark: case statuses {[r.status for r in results]}, expected [0] (OK)")
    print("one Attend and one RunBenchmark case on the cpu backend: OK"
          + (f" (TLS for {ident.authority}, participant ada's token)" if ident.tls and ident.tokens else ""))

    if ident.tokens:
        # A participant added to the Secret while the server runs: in within 15 s, no restart.
        token, started, last = ident.add_participant("late"), time.monotonic(), ""
        with ident.channel(server.grpc_port) as channel:
            stub = pb_grpc.AttentionServiceStub(channel)
            while True:
                try:
                    stub.Attend(attend, timeout=10, metadata=ident.metadata(token))
                    break
                except grpc.RpcError as e:
                    last = f"{e.code().name}: {e.details()}"
                if time.monotonic() - started > 15:
                    fail(f"a participant added to the tokens Secret was not let in within 15 s: {last}")
                time.sleep(0.25)
        if server.proc.poll() is not None:
            fail("attn-server exited while its tokens file changed")
        print(f"tokens Secret updated (a new ..data, as the kubelet swaps it): participant 'late' let in after "
              f"{time.monotonic() - started:.1f} s, no restart")

    if server.metrics_port is None:
        fail("the flag file turns the metrics endpoint off")
    body = urllib.request.urlopen(f"http://127.0.0.1:{server.metrics_port}/metrics", timeout=10).read().decode()
    pathlib.Path(args.out).write_text(body)
    families = len(re.findall(r"^# TYPE ", body, re.M))
    print(f"scrape: {families} metric families, {len(body.splitlines())} lines -> {args.out}")

    # 4: SIGTERM with a benchmark job in flight (3 cases of about a second each): readiness must
    # turn NOT_SERVING (the pod leaves the Services) while liveness stays SERVING (no restart),
    # the accepted job must still finish, and the process exit 0 within the grace period.
    draining = {p: ("NOT_SERVING" if p == "readinessProbe" else "SERVING") for p in probes}
    channel = ident.channel(server.grpc_port)
    stub = pb_grpc.AttentionServiceStub(channel)
    job = pb.RunBenchmarkRequest(
        cases=pb.CaseList(cases=[pb.BenchmarkCase(section="drain", dtype=pb.FLOAT32, backend="cpu",
                                                  shape=pb.Shape(batch=1, q_len=128, num_heads=4, head_dim=64))
                                 for _ in range(3)]),
        options=pb.BenchmarkOptions(warmup=0, repeats=10000, case_budget_seconds=1.0))
    started, events, errors = threading.Event(), [], []

    def run_job():
        try:
            for e in stub.RunBenchmark(job, timeout=60, metadata=ident.metadata()):
                events.append(e)
                if e.HasField("case_started"):
                    started.set()
        except grpc.RpcError as e:
            errors.append(f"{e.code().name}: {e.details()}")
        started.set()

    runner = threading.Thread(target=run_job, daemon=True)
    runner.start()
    if not started.wait(30) or errors:
        fail(f"the drain's benchmark job did not start: {errors}")
    server.proc.send_signal(signal.SIGTERM)
    got, deadline = {}, time.monotonic() + 5
    while time.monotonic() < deadline and runner.is_alive():
        got = {p: server.health(s) for p, s in probes.items()}
        if got == draining:
            break
        time.sleep(0.05)
    if got != draining:
        fail(f"within 5 s of SIGTERM, with a job in flight: {got}, expected {draining}")
    runner.join(grace)
    channel.close()
    results = [e.result.status for e in events if e.HasField("result")]
    if errors or results != [grpc.StatusCode.OK.value[0]] * 3:  # google.rpc.Code numbers
        fail(f"the job accepted before SIGTERM did not finish in the drain: statuses {results}, errors {errors}")
    try:
        rc = server.proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        fail(f"attn-server did not exit within terminationGracePeriodSeconds ({grace} s) of SIGTERM")
    if rc != 0:
        fail(f"attn-server exited {rc} after SIGTERM:\n{server.text()[-2000:]}")
    print(f"SIGTERM with a job in flight: readiness NOT_SERVING, liveness SERVING, the job's 3 cases OK, "
          f"exit 0 within {grace} s")

    # 5: a GPU that cannot be used.
    summary = (f"probes, one Attend + one benchmark case, {families} families scraped, SIGTERM drains a job "
               f"and exits 0 within {grace} s")
    gpu = Server(args, local + ["--devices=0"], work / "gpu.log")
    if gpu.serving:
        print("unusable GPU: skipped (GPU 0 works on this machine)")
        gpu.stop(grace)
        print(f"OK: {summary}")
        return
    unusable = {p: ("NOT_SERVING" if p == "readinessProbe" else "SERVING") for p in probes}
    reason = re.search(r"GPU unusable: NOT_SERVING reason=\"([^\"]*)\"", gpu.text())
    if not reason:
        fail(f"NOT_SERVING without a 'GPU unusable' line giving the reason:\n{gpu.text()}")
    print("unusable GPU (" + reason.group(1)[:60] + "): " + expect_health(gpu, probes, unusable, "unusable GPU"))
    if gpu.stop(grace) != 0:
        fail("attn-server with an unusable GPU did not exit 0 on SIGTERM")
    print(f"OK: {summary}; an unusable GPU leaves the pod live but not ready")


if __name__ == "__main__":
    main()
