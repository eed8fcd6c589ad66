#!/usr/bin/env python3
"""The cohort's JupyterHub, live on loopback: deploy/jupyterhub/jupyterhub_config.py as deployed,
with a local spawner standing in for KubeSpawner (tests/deploy/jupyterhub_local_config.py),
configurable-http-proxy (Debian's node-configurable-http-proxy) started by the hub, and a real
attn-server on the cpu backend with the cohort's TLS and tokens from the host's scripts.

    tests/deploy/jupyterhub_live.py ATTN_SERVER_BINARY [--keep DIR]

What it shows, one line per check, then "N passed, M failed":
  - plain HTTP is only a redirect to HTTPS; the host signs up without an approval, the
    participants' sign-ups wait for the host's, and a name without a token gets no server;
  - alice and bob log in through the hub's HTTP API and each gets a server of their own, with
    their own ATTN_TOKEN (from their Secret) and nobody else's;
  - each runs the codelab notebook (nbclient, its kernel on their server, through the hub);
  - attn-server's log and metrics name both participants;
  - alice's token and alice's browser session are refused on bob's server, and so is the host;
  - the idle culler runs.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

import requests
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
NOTEBOOK = ROOT / "client/python/notebooks/codelab.ipynb"
RUN_PY = ROOT / "client/python/notebooks/run.py"
PASSWORDS = {"host": "host-pass-0123", "alice": "alice-pass-0123", "bob": "bob-pass-0123", "mallory": "mallory-pass-01"}


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def check(self, ok, what, detail=""):
        if ok:
            self.passed += 1
            print(f"PASS  {what}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL  {what}" + (f": {detail}" if detail else ""), flush=True)
        return ok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, predicate, timeout_s, proc=None, log=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited ({proc.returncode}); its log:\n"
                               f"{log.read_text()[-4000:] if log else ''}")
        try:
            value = predicate()
            if value:
                return value
        except (requests.RequestException, OSError):
            pass
        time.sleep(0.25)
    raise RuntimeError(f"{what}: not within {timeout_s} s" + (f"; log:\n{log.read_text()[-4000:]}" if log else ""))


def run(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=True, **kw)


class Hub:
    """A browser-like session on the hub: the xsrf cookie, forms, the REST API."""

    def __init__(self, base, ca):
        self.base = base
        self.s = requests.Session()
        self.s.trust_env = False  # $REQUESTS_CA_BUNDLE would win over the cohort CA
        self.s.verify = ca

    def xsrf(self):
        if "_xsrf" not in self.s.cookies:
            self.s.get(f"{self.base}/hub/login")
        return self.s.cookies.get("_xsrf", path="/hub/") or self.s.cookies.get("_xsrf")

    def form(self, path, data):
        return self.s.post(f"{self.base}{path}", data={**data, "_xsrf": self.xsrf()}, allow_redirects=False)

    def api(self, method, path, **kw):
        return self.s.request(method, f"{self.base}/hub/api{path}", headers={"X-XSRFToken": self.xsrf()}, **kw)

    def signup(self, name):
        return self.form("/hub/signup", {"username": name, "signup_password": PASSWORDS[name],
                                         "signup_password_confirmation": PASSWORDS[name]})

    def login(self, name):
        r = self.form("/hub/login", {"username": name, "password": PASSWORDS[name]})
        return r.status_code == 302 and "jupyterhub-session-id" in self.s.cookies


def server_env(user):
    """The environment of `user`'s notebook server process (the local spawner's child)."""
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            raw = (proc / "environ").read_bytes()
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        env = dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)
        if env.get("JUPYTERHUB_USER") == user and b"jupyterhub-singleuser" in cmdline:
            return env
    return None


def servers_of_hub(api_port):
    """Notebook server processes still running for the hub on `api_port` (ours alone)."""
    pids = []
    for proc in pathlib.Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and f"JUPYTERHUB_API_URL=http://127.0.0.1:{api_port}/".encode() in (proc / "environ").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("server_binary")
    ap.add_argument("--keep", help="keep the logs and executed notebooks in this folder")
    args = ap.parse_args()
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="attn-hub-live."))
    work.mkdir(parents=True, exist_ok=True)
    t = Checks()
    procs = []
    host, api = None, 0
    started = time.monotonic()
    try:
        # The host's scripts, as on the workshop day: tokens (and the notebook Secrets), the CA.
        cohort = work / "cohort"
        run([ROOT / "scripts/mint-tokens.sh", cohort, "alice", "bob", "--admin", "host"])
        run([ROOT / "scripts/make-cohort-ca.sh", cohort])
        handout = dict(line.split() for line in (cohort / "handout.txt").read_text().splitlines() if not line.startswith("#"))
        participants_cm = yaml.safe_load((cohort / "attn-hub-participants.configmap.yaml").read_text())
        (work / "participants.txt").write_text(participants_cm["data"]["participants.txt"])

        # attn-server with the cohort's TLS and tokens, on the cpu backend.
        metrics_port = free_port()
        server_log = work / "attn-server.log"
        with open(server_log, "w") as out:
            procs.append(subprocess.Popen(
                [args.server_binary, "--listen_address=127.0.0.1:0", f"--metrics_address=127.0.0.1:{metrics_port}",
                 "--devices=cpu", "--arena_mib=256", "--log_format=json", f"--tls_cert_file={cohort / 'tls.crt'}",
                 f"--tls_key_file={cohort / 'tls.key'}", f"--tokens_file={cohort / 'tokens.txt'}"],
                stdout=out, stderr=subprocess.STDOUT))
        grpc_port = wait_for("attn-server serving", lambda: re.search(r'127\.0\.0\.1:0 \(port ([0-9]+)\)',
                                                                        server_log.read_text()), 20, procs[-1], server_log)
        grpc_port = int(grpc_port.group(1))

        # The hub: the deployed config through the local stand-in, the environment the hub
        # Deployment sets, with this machine's ports and folders.
        public, redirect, api = free_port(), free_port(), free_port()
        hub_env = {
            **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "VIRTUAL_ENV", "NODE_PATH")},
            "ATTN_HUB_CONFIG": str(ROOT / "deploy/jupyterhub/jupyterhub_config.py"),
            "ATTN_HUB_PUBLIC_PORT": str(public), "ATTN_HUB_REDIRECT_PORT": str(redirect),
            "ATTN_HUB_REDIRECT_TO": str(public), "ATTN_HUB_API_PORT": str(api),
            "ATTN_HUB_PROXY_API_PORT": str(free_port()), "ATTN_HUB_CONNECT_URL": f"http://127.0.0.1:{api}",
            "ATTN_HUB_TLS_DIR": str(cohort), "ATTN_HUB_DATA_DIR": str(work / "hub-data"),
            "ATTN_HUB_PARTICIPANTS": str(work / "participants.txt"), "ATTN_HUB_IDLE_TIMEOUT_S": "3600",
            "ATTN_HUB_TOKEN_SECRETS": str(cohort / "attn-notebook-tokens.secret.yaml"),
            "ATTN_HUB_HOMES": str(work / "homes"),
            "ATTN_TARGET": f"localhost:{grpc_port}", "ATTN_TLS_CA_FILE": str(cohort / "cohort-ca.crt"),
        }
        (work / "hub-data").mkdir(exist_ok=True)
        hub_log = work / "jupyterhub.log"
        with open(hub_log, "w") as out:
            procs.append(subprocess.Popen(["jupyterhub", "-f", HERE / "jupyterhub_local_config.py"], cwd=work / "hub-data",
                                          env=hub_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))
        hub_proc = procs[-1]
        base = f"https://localhost:{public}"
        ca = str(cohort / "cohort-ca.crt")
        wait_for("the hub behind the proxy, over HTTPS", lambda: requests.get(f"{base}/hub/health", verify=ca).ok, 90, hub_proc, hub_log)
        t.check("ATTN_TOKEN" not in open(f"/proc/{hub_proc.pid}/environ").read(), "the hub itself holds no attn token")

        # HTTPS only: plain HTTP answers with a redirect to the HTTPS port, nothing else.
        r = requests.get(f"http://localhost:{redirect}/hub/login", allow_redirects=False)
        t.check(r.status_code in (301, 302, 307, 308) and r.headers.get("Location", "").startswith(f"https://localhost:{public}/"),
                "plain HTTP only redirects to HTTPS", f"{r.status_code} {r.headers.get('Location')}")
        try:
            plain = requests.get(f"http://localhost:{public}/hub/login", allow_redirects=False).status_code
        except requests.ConnectionError:
            plain = "closed"
        t.check(plain == "closed" or plain >= 400, "the HTTPS port does not serve plain HTTP", str(plain))

        # Sign-ups: the host's needs no approval; the participants' wait for the host's.
        host, alice, bob, mallory = (Hub(base, ca) for _ in range(4))
        for name, session in (("host", host), ("alice", alice), ("bob", bob), ("mallory", mallory)):
            session.signup(name)
        t.check(host.login("host"), "the host (admin in the tokens file) signs up and logs in without an approval")
        t.check(not alice.login("alice"), "alice cannot log in before the host approves her sign-up")
        for name in ("alice", "bob", "mallory"):
            host.s.get(f"{base}/hub/authorize/{name}")
        t.check(alice.login("alice") and bob.login("bob") and mallory.login("mallory"), "approved participants log in")
        r = host.s.get(f"{base}/hub/admin")
        t.check(r.status_code == 200, "the host has the hub's admin page", str(r.status_code))
        r = alice.s.get(f"{base}/hub/admin", allow_redirects=False)
        t.check(r.status_code in (403, 404), "a participant does not", str(r.status_code))

        # Servers through the hub's REST API, each participant their own.
        for name, session in (("alice", alice), ("bob", bob)):
            r = session.api("POST", f"/users/{name}/server")
            t.check(r.status_code in (201, 202), f"{name} starts their server", f"{r.status_code} {r.text[:200]}")
        r = mallory.api("POST", "/users/mallory/server")
        t.check(r.status_code >= 400 and "no attn token was minted for 'mallory'" in (r.text + hub_log.read_text()),
                "a name without a token gets no server, and says why", f"{r.status_code} {r.text[:200]}")
        r = alice.api("POST", "/users/bob/server")
        t.check(r.status_code in (403, 404), "alice cannot start bob's server", str(r.status_code))
        tokens = {}
        for name, session in (("alice", alice), ("bob", bob)):
            wait_for(f"{name}'s server ready", lambda: session.api("GET", f"/users/{name}").json()["servers"][""]["ready"],
                     120, hub_proc, hub_log)
            r = session.api("POST", f"/users/{name}/tokens", json={"note": "jupyterhub_live"})
            tokens[name] = r.json().get("token", "")
        envs = {name: server_env(name) or {} for name in ("alice", "bob")}
        for name, other in (("alice", "bob"), ("bob", "alice")):
            env = envs[name]
            t.check(env.get("ATTN_TOKEN") == handout[name], f"{name}'s server has {name}'s token as ATTN_TOKEN (from their Secret)")
            t.check(handout[other] not in "\0".join(env.values()) and handout["host"] not in "\0".join(env.values()),
                    f"{name}'s server holds neither {other}'s token nor the host's")
            t.check(env.get("ATTN_TARGET") == f"localhost:{grpc_port}" and env.get("ATTN_TLS_CA_FILE") == ca,
                    f"{name}'s server has ATTN_TARGET and ATTN_TLS_CA_FILE")

        # Isolation between participants, and from the host.
        r = requests.get(f"{base}/user/bob/api/status", headers={"Authorization": f"token {tokens['alice']}"}, verify=ca)
        t.check(r.status_code == 403, "alice's token is refused on bob's server", str(r.status_code))
        r = alice.s.get(f"{base}/user/bob/lab", allow_redirects=True)
        t.check(r.status_code == 403 and "/user/bob/" not in urllib.parse.urlparse(r.url).path.removeprefix("/hub"),
                "alice's browser session is refused on bob's server", f"{r.status_code} {r.url}")
        r = requests.get(f"{base}/user/alice/api/status", headers={"Authorization": f"token {tokens['alice']}"}, verify=ca)
        t.check(r.status_code == 200, "alice's token opens alice's server", str(r.status_code))
        host_token = host.api("POST", "/users/host/tokens", json={"note": "jupyterhub_live"}).json().get("token", "")
        r = requests.get(f"{base}/user/alice/api/status", headers={"Authorization": f"token {host_token}"}, verify=ca)
        t.check(r.status_code == 403, "the host cannot open a participant's server", str(r.status_code))

        # The codelab notebook, each on their own server (a kernel there, through the hub), at once.
        runs = {}
        for name in ("alice", "bob"):
            log = open(work / f"notebook-{name}.log", "w")
            runs[name] = (subprocess.Popen([sys.executable, RUN_PY, NOTEBOOK, "--server", f"{base}/user/{name}",
                                            "--server-token", tokens[name], "--ca", ca,
                                            "--out", work / f"codelab-{name}.ipynb"],
                                           stdout=log, stderr=subprocess.STDOUT), log)
        for name, (proc, log) in runs.items():
            rc = proc.wait(timeout=900)
            log.close()
            text = (work / f"notebook-{name}.log").read_text()
            t.check(rc == 0 and re.search(r"tables \(0 empty\)", text), f"{name} runs the codelab notebook on their server",
                    text[-1500:])

        # The server saw two participants, by name.
        lines = [json.loads(line) for line in server_log.read_text().splitlines() if line.startswith("{")]
        for name in ("alice", "bob"):
            calls = [l for l in lines if l.get("participant") == name]
            t.check(len(calls) >= 5, f"attn-server's log names {name} ({len(calls)} calls)")
        metrics = requests.get(f"http://127.0.0.1:{metrics_port}/metrics").text
        for name in ("alice", "bob"):
            t.check(re.search(rf'attn_participant_requests_total\{{[^}}]*participant="{name}"', metrics),
                    f"attn-server's metrics name {name}")
        t.check(not re.search(r'participant="host"', metrics), "the host, who ran nothing, is not in them")

        # The idle culler runs beside the hub, as a service of it.
        culler = any(b"jupyterhub_idle_culler" in (p / "cmdline").read_bytes()
                     for p in pathlib.Path("/proc").iterdir() if p.name.isdigit() and (p / "cmdline").exists())
        t.check(culler, "jupyterhub-idle-culler runs as the hub's service")
    except Exception as e:  # a step that could not even be tried
        t.check(False, "the live run", f"{type(e).__name__}: {e}")
    finally:
        # The deployed config leaves servers running when the hub stops (cleanup_servers = False,
        # so a hub restart does not end a workshop): stop them through the hub, then any left.
        for name in ("alice", "bob"):
            try:
                host.api("DELETE", f"/users/{name}/server", timeout=30)
            except Exception:  # noqa: BLE001  (the hub may be gone already)
                pass
        for pid in servers_of_hub(api):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in reversed(procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM) if p is not procs[0] else p.terminate()
                    p.wait(timeout=20)
                except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
                    p.kill()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"jupyterhub live: {time.monotonic() - started:.0f} s")
    print(f"{t.passed} passed, {t.failed} failed")
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
