#!/usr/bin/env python3
"""Offline checks of attn's deployment files; scripts/deploy-check.sh runs each subcommand.

Every subcommand prints one summary line and exits 0, or prints one line per problem and
exits 1. Nothing here needs a cluster, a cloud account or the network.

  k8s-schema RENDER    objects of a `kubectl kustomize` render against Kubernetes' schemas
                       (kubernetes-validate, strict) and custom resources against crd_schemas.yaml
  policy RENDER        what the deployment must keep: GPU placement, probes (on the plaintext
                       health port when gRPC speaks TLS), restricted security context, drain timing
                       vs --shutdown_grace_s, selectors and ports that line up, NetworkPolicy scope
                       (the cohort by kubernetes.io/metadata.name, DNS-only egress), scrape targets
                       that exist, tokens and TLS from read-only Secret mounts, the PriorityClass,
                       the flags a shared device needs; no token or key in any ConfigMap; the
                       cohort's namespace: no GPUs in its quota, a LimitRange, default-deny
  rules-sync           the GMP Rules and PrometheusRule objects hold exactly the canonical rules
                       (--write regenerates them)
  rules-policy         quantiles aggregate buckets across replicas; thresholds agree with flags
  terraform DIR        HCL parse of every .tf, the codelab's variables/outputs, validations,
                       the L4 pool, GMP + DCGM, Workload Identity, Artifact Registry, the driver
                       vs the Dockerfile's CUDA major, every var./resource reference declared
  dashboard FILE       Grafana JSON structure: data source variable, ids, layout, queries
  metric-names         every metric a rule or dashboard query names is exported by attn-server
                       (expected_metrics.txt), recorded by a rule, or listed as external; with
                       --scrape, every attn-server metric, label and exact label value a query
                       uses is in that real /metrics scrape
  scrape FILE          every expected family is in a real /metrics scrape, with its type
  server-flags FLAGFILE BINARY
                       every flag in the ConfigMap's flag file is one the binary knows
  dockerfile FILE      multi-stage CUDA/cuDNN devel -> runtime, packages only through
                       scripts/apt-packages.txt + deps.sh, numeric non-root user, the two
                       binaries, ports matching the flag file, every source CMake builds in
                       the build context (.dockerignore)
  cohort-scripts --server-render RENDER [--hub-render RENDER] --work DIR
                       scripts/mint-tokens.sh and scripts/make-cohort-ca.sh run into DIR: formats,
                       modes, each hash the SHA-256 of the token handed out, the certificate's
                       names against the Services, the Secrets' names and keys against the mounts
  no-secrets [ROOT]    no token, tokens-file line, private key or Secret with data in what git
                       would commit (the server's and client's own tests aside)
  jupyterhub RENDER --server-render RENDER --work DIR [--require-filled]
                       the cohort's JupyterHub (deploy/jupyterhub): a restricted hub pod, HTTPS on
                       443 from the listed source ranges (never every address) and the redirect,
                       its Role without Secrets; the participant's pod as KubeSpawner makes it
                       from the deployed jupyterhub_config.py: restricted, read-only root, no
                       service-account token, ATTN_TOKEN from the participant's own Secret,
                       ATTN_TARGET a gRPC port whose NetworkPolicy admits the namespace, reached
                       by the hub alone (never by another participant's pod), inside the quota;
                       every image pinned (by digest with --require-filled); the two Dockerfiles
"""
import argparse
import base64
import hashlib
import json
import pathlib
import re
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
CANONICAL_RULES = ROOT / "deploy/monitoring/attn.rules.yaml"
RULE_OBJECTS = {
    ROOT / "deploy/components/gmp/rules.yaml": ("monitoring.googleapis.com/v1", "Rules"),
    ROOT / "deploy/components/prometheus-operator/prometheusrule.yaml": ("monitoring.coreos.com/v1",
                                                                        "PrometheusRule"),
}
SERVER = "attn-server"
SERVER_NAMESPACE = "attn"
# Who may reach the pods: gRPC from the cohort's namespaces (deploy/cohort), metrics from these
# namespaces (GMP's collectors on GKE, prometheus-operator's usual home), each named by
# kubernetes.io/metadata.name: the API server sets that label to the namespace's name, while any
# other label is whatever a namespace's editor wrote.
NAME_LABEL = "kubernetes.io/metadata.name"
COHORT_NAMESPACES = {"attn-cohort"}
MONITORING_NAMESPACES = {"gmp-system", "gke-gmp-system", "monitoring"}
# The cluster's DNS, the one egress destination besides attn-server (GKE's kube-dns pods).
DNS_PEER = {"namespaceSelector": {"matchLabels": {NAME_LABEL: "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}
# Where the Deployment mounts the host's Secrets (scripts/mint-tokens.sh, scripts/make-cohort-ca.sh)
# and the keys those scripts write.
TOKENS_SECRET, TLS_SECRET, CA_CONFIGMAP = "attn-server-tokens", "attn-server-tls", "attn-cohort-ca"
PRIORITY_CLASS = "attn-server"
# A participant's mint-tokens.sh token, a tokens-file line, a PEM private key: none of them may be
# in a ConfigMap, or anywhere in the repository outside the server's and client's own tests.
TOKEN_RE = re.compile(r"\battn_[A-Za-z0-9_-]{43}\b")
TOKENS_LINE_RE = re.compile(r"^\s*[A-Za-z0-9._-]{1,64}\s+[0-9a-fA-F]{64}(\s+(participant|admin))?(\s+[a-z_]+=\S+)*\s*$", re.M)
PRIVATE_KEY_RE = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----")


class Problems:
    """Collects problems; report() prints them (or the summary) and gives the exit code."""

    def __init__(self):
        self.items = []

    def add(self, msg):
        self.items.append(msg)

    def require(self, cond, msg):
        if not cond:
            self.add(msg)
        return bool(cond)

    def report(self, summary):
        if self.items:
            for item in self.items:
                print(item)
            return 1
        print(summary)
        return 0


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def dig(obj, *keys, default=None):
    for key in keys:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return default
    return obj


def selector_matches(selector, labels):
    """Kubernetes LabelSelector semantics (matchLabels and matchExpressions)."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# --- k8s-schema --------------------------------------------------------------------------------

def cmd_k8s_schema(args):
    import kubernetes_validate
    from kubernetes_validate import utils as kv_utils
    import jsonschema

    # kubernetes-validate re-reads the (large) definitions file for every object; read it once.
    original = kv_utils.schema_contents
    cache = {}

    def cached(filename, desired_version):
        key = (filename, desired_version)
        if key not in cache:
            cache[key] = original(filename, desired_version)
        return cache[key]

    kv_utils.schema_contents = cached

    crd = yaml.safe_load(open(HERE / "crd_schemas.yaml"))["schemas"]
    versions = [v for v in args.kube_versions.split(",") if v]
    problems = Problems()
    builtin = custom = 0
    skipped = []
    for doc in load_docs(args.render):
        name = f'{doc.get("kind")}/{dig(doc, "metadata", "name")}'
        api = doc.get("apiVersion", "")
        key = f'{api}/{doc.get("kind")}'
        try:
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except kubernetes_validate.ValidationError as e:
                    path = "/".join(str(p) for p in e.absolute_path) or "(top)"
                    problems.add(f"{name}: Kubernetes {version} schema: at {path}: {e.message}")
                    break
            builtin += 1
        except kubernetes_validate.SchemaNotFoundError:
            if key in crd:
                validator = jsonschema.Draft202012Validator(crd[key])
                errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
                for e in errors:
                    path = "/".join(str(p) for p in e.absolute_path) or "(top)"
                    problems.add(f"{name}: {key} schema (crd_schemas.yaml): at {path}: {e.message}")
                custom += 1
            else:
                skipped.append(f"{name} ({key}: no schema in kubernetes-validate or crd_schemas.yaml)")
    summary = (f"{builtin} objects valid against Kubernetes {', '.join(versions)} (strict), "
               f"{custom} custom resources against crd_schemas.yaml")
    if skipped:
        summary += "; skipped " + "; ".join(skipped)
    return problems.report(summary)


# --- policy ------------------------------------------------------------------------------------

def parse_flagfile(text):
    flags = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"--([a-z0-9_]+)(?:=(.*))?", line)
        if not m:
            raise ValueError(f"flag file line is not --name=value: {line!r}")
        flags[m.group(1)] = m.group(2) if m.group(2) is not None else "true"
    return flags


def port_of(address):
    m = re.search(r":(\d+)$", address or "")
    return int(m.group(1)) if m else None


def cmd_policy(args):
    docs = load_docs(args.render)
    problems = Problems()
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)

    for ns in by_kind.get("Namespace", []):
        labels = dig(ns, "metadata", "labels") or {}
        enforced = labels.get("pod-security.kubernetes.io/enforce")
        # attn's own namespace enforces "restricted"; a cohort namespace at least "baseline".
        wanted = ("baseline", "restricted") if ns["metadata"]["name"] in COHORT_NAMESPACES else ("restricted",)
        problems.require(enforced in wanted,
                         f'Namespace/{ns["metadata"]["name"]}: Pod Security enforces {enforced!r}, not {" or ".join(wanted)}')

    material = material_problems(docs, problems)
    open_range_problems(docs, False, problems)
    cohort_summary = ""
    for ns in by_kind.get("Namespace", []):
        if ns["metadata"]["name"] in COHORT_NAMESPACES:
            cohort_summary = cohort_policy(by_kind, ns["metadata"]["name"], problems)

    deployments = [d for d in by_kind.get("Deployment", []) if d["metadata"]["name"] == SERVER]
    if not deployments:
        n = len(docs)
        return problems.report(f"no {SERVER} Deployment in this render ({n} objects): namespaces, {material}"
                               + (f"; {cohort_summary}" if cohort_summary else ""))
    dep = deployments[0]
    where = f"Deployment/{SERVER}"
    pod = dep["spec"]["template"]
    pod_labels = dig(pod, "metadata", "labels") or {}
    spec = pod["spec"]
    problems.require(selector_matches(dep["spec"].get("selector"), pod_labels),
                     f"{where}: spec.selector does not match the pod template's labels")

    # Placement on L4 nodes.
    problems.require(dig(spec, "nodeSelector", "cloud.google.com/gke-accelerator") == "nvidia-l4",
                     f"{where}: nodeSelector cloud.google.com/gke-accelerator must be nvidia-l4")
    problems.require(any(t.get("key") == "nvidia.com/gpu" for t in spec.get("tolerations") or []),
                     f"{where}: no toleration for the nvidia.com/gpu taint")

    # Pod security.
    psc = spec.get("securityContext") or {}
    problems.require(psc.get("runAsNonRoot") is True, f"{where}: pod securityContext.runAsNonRoot must be true")
    problems.require(dig(psc, "seccompProfile", "type") == "RuntimeDefault",
                     f"{where}: pod seccompProfile must be RuntimeDefault")
    problems.require(spec.get("automountServiceAccountToken") is False,
                     f"{where}: automountServiceAccountToken must be false (the server calls no API)")

    # Its own PriorityClass, in the render: ahead of pods without one, below the system classes.
    pc_name = spec.get("priorityClassName")
    pcs = {pc["metadata"]["name"]: pc for pc in by_kind.get("PriorityClass", [])}
    if problems.require(pc_name, f"{where}: no priorityClassName (PriorityClass {PRIORITY_CLASS})") \
            and problems.require(pc_name in pcs, f"{where}: priorityClassName {pc_name}: no such PriorityClass in this render"):
        value = pcs[pc_name].get("value", 0)
        problems.require(0 < value <= 1_000_000_000,
                         f"PriorityClass/{pc_name}: value {value} must be above 0 (pods without a class) and at most 1e9 (below the system classes)")
        problems.require(pcs[pc_name].get("globalDefault") is not True,
                         f"PriorityClass/{pc_name}: globalDefault would give every pod of the cluster attn-server's priority")

    containers = [c for c in spec.get("containers") or [] if c.get("name") == SERVER]
    if not problems.require(containers, f"{where}: no container named {SERVER}"):
        return problems.report("")
    c = containers[0]
    cw = f"{where} container {SERVER}"
    csc = c.get("securityContext") or {}
    problems.require(csc.get("allowPrivilegeEscalation") is False, f"{cw}: allowPrivilegeEscalation must be false")
    problems.require("ALL" in (dig(csc, "capabilities", "drop") or []), f"{cw}: capabilities must drop ALL")
    problems.require(not dig(csc, "capabilities", "add"), f"{cw}: adds capabilities")
    problems.require(csc.get("readOnlyRootFilesystem") is True, f"{cw}: readOnlyRootFilesystem must be true")
    problems.require(csc.get("privileged") is not True, f"{cw}: privileged")
    problems.require(csc.get("runAsNonRoot") in (True, None) and psc.get("runAsNonRoot") is True,
                     f"{cw}: runAsNonRoot")

    # Resources.
    for section in ("requests", "limits"):
        for res in ("cpu", "memory"):
            problems.require(dig(c, "resources", section, res) is not None, f"{cw}: no {section}.{res}")
    problems.require(str(dig(c, "resources", "limits", "nvidia.com/gpu")) == "1",
                     f"{cw}: limits nvidia.com/gpu must be 1 (one replica per L4)")

    # Volumes: /tmp is an emptyDir (read-only root), the flag file comes from the ConfigMap.
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}
    tmp = mounts.get("/tmp")
    problems.require(tmp and "emptyDir" in volumes.get(tmp["name"], {}), f"{cw}: /tmp must be an emptyDir mount")

    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    problems.require("grpc" in ports and "metrics" in ports, f"{cw}: needs ports named grpc and metrics")

    flags = {}
    flagfile_args = [a for a in c.get("args") or [] if a.startswith("--flagfile=")]
    if problems.require(flagfile_args, f"{cw}: args must pass --flagfile=<mounted ConfigMap key>"):
        path = flagfile_args[0].split("=", 1)[1]
        mount_dir, key = path.rsplit("/", 1)
        mount = mounts.get(mount_dir)
        cm_name = dig(volumes.get(mount["name"]) if mount else None, "configMap", "name")
        cms = [m for m in by_kind.get("ConfigMap", []) if m["metadata"]["name"] == cm_name]
        if problems.require(cms and key in (cms[0].get("data") or {}),
                            f"{cw}: {path} is not a key of a ConfigMap in this render"):
            try:
                flags = parse_flagfile(cms[0]["data"][key])
            except ValueError as e:
                problems.add(f"ConfigMap/{cm_name}: {e}")

    if flags:
        lp, mp = port_of(flags.get("listen_address", "0.0.0.0:50051")), port_of(flags.get("metrics_address", "0.0.0.0:9464"))
        problems.require(lp == ports.get("grpc"), f"{cw}: port grpc ({ports.get('grpc')}) is not --listen_address's ({lp})")
        problems.require(mp == ports.get("metrics"), f"{cw}: port metrics ({ports.get('metrics')}) is not --metrics_address's ({mp})")
        if flags.get("health_address"):
            hp = port_of(flags["health_address"])
            problems.require(hp == ports.get("health"), f"{cw}: port health ({ports.get('health')}) is not --health_address's ({hp})")
        secret_mounts(flags, cw, mounts, volumes, cm_name, problems)
        cohort_flag_problems(flags, f"ConfigMap/{cm_name}", problems)
        # A pod that holds GPUs names them: with --devices empty, a container that lost its GPU
        # (no libcuda mounted) would quietly serve on the cpu backend and look healthy; with
        # ordinals it stays NOT_SERVING and says why.
        gpus = int(dig(c, "resources", "limits", "nvidia.com/gpu", default=0) or 0)
        devices = flags.get("devices", "")
        if gpus:
            ordinals = devices.split(",") if devices else []
            problems.require(ordinals and all(o.isdigit() and int(o) < gpus for o in ordinals),
                             f"ConfigMap/{cm_name}: --devices={devices!r}: a pod with nvidia.com/gpu: {gpus} must name its "
                             f"GPUs (0..{gpus - 1}), or a pod without its GPU falls back to the cpu backend and looks healthy")

    # Probes: native gRPC against grpc.health.v1: on the gRPC port, or where that speaks TLS (the
    # kubelet's gRPC probe cannot) on --health_address's plaintext port.
    tls_on = bool(flags.get("tls_cert_file"))
    if flags.get("health_address"):
        probe_port, probe_port_name = port_of(flags["health_address"]), "the plaintext health port (--health_address)"
    else:
        probe_port, probe_port_name = ports.get("grpc"), "the grpc port"
        problems.require(not tls_on, f"ConfigMap/{cm_name}: --tls_cert_file without --health_address: the kubelet's "
                                     f"gRPC probes cannot speak TLS, so the pod would never start")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        if problems.require(p and "grpc" in p, f"{cw}: {probe} must be a native grpc probe"):
            problems.require(p["grpc"].get("port") == probe_port,
                             f"{cw}: {probe} probes port {p['grpc'].get('port')}, not {probe_port_name} {probe_port}")
    problems.require(dig(c, "readinessProbe", "grpc", "service") == "attention.v1.AttentionService",
                     f"{cw}: readinessProbe must ask about attention.v1.AttentionService")

    # Drain: preStop + --shutdown_grace_s + what attn-server takes after its grace (Server::Drain
    # stops what is left and waits up to 2 s for the answers, then a 1 s gRPC shutdown; main's
    # watchdog ends the process at grace + 4 s whatever runs) fit in the termination grace
    # period, with a second to exit, and not much more.
    pre_stop = dig(c, "lifecycle", "preStop", "sleep", "seconds")
    grace = spec.get("terminationGracePeriodSeconds")
    if problems.require(pre_stop is not None, f"{cw}: needs a preStop sleep (endpoints drop the pod first)") \
            and problems.require(grace is not None, f"{where}: terminationGracePeriodSeconds not set"):
        drain = float(flags.get("shutdown_grace_s", 25))
        after = 4 + 1
        problems.require(pre_stop + drain + after <= grace <= pre_stop + drain + 30,
                         f"{where}: terminationGracePeriodSeconds {grace} does not match preStop {pre_stop} s"
                         f" + --shutdown_grace_s {drain:g} s (+{after}..30 s: stopping what is left takes"
                         f" attn-server up to 4 s, then it exits)")

    # Services: selectors reach the pods, target ports exist; one ClusterIP, one headless.
    services = by_kind.get("Service", [])
    kinds = set()
    external_ranges = []  # the source ranges of each external LoadBalancer (components/external)
    for svc in services:
        sw = f'Service/{svc["metadata"]["name"]}'
        if not selector_matches({"matchLabels": dig(svc, "spec", "selector") or {}}, pod_labels) \
                or not dig(svc, "spec", "selector"):
            continue
        kinds.add("headless" if dig(svc, "spec", "clusterIP") == "None" else "clusterip")
        for p in dig(svc, "spec", "ports") or []:
            tp = p.get("targetPort", p.get("port"))
            problems.require(tp in ports or tp in ports.values(), f"{sw}: targetPort {tp} is not a port of the pod")
            problems.require("health" not in ports or tp not in ("health", ports["health"]),
                             f"{sw}: carries the plaintext health port {tp}; only the kubelet may ask it")
        if dig(svc, "spec", "clusterIP") == "None":
            problems.require(any(p.get("targetPort") == "grpc" for p in dig(svc, "spec", "ports") or []),
                             f"{sw}: headless Service must carry the grpc port")
        if dig(svc, "spec", "type") == "LoadBalancer":
            problems.require([p.get("targetPort") for p in dig(svc, "spec", "ports") or []] == ["grpc"],
                             f"{sw}: a LoadBalancer carries the grpc port (TLS, tokens) alone; metrics are scraped in-cluster")
            problems.require(dig(svc, "spec", "externalTrafficPolicy") == "Local",
                             f"{sw}: externalTrafficPolicy must be Local, or the NetworkPolicy sees node addresses, not clients'")
            ranges = sorted(dig(svc, "spec", "loadBalancerSourceRanges") or [])
            if problems.require(ranges, f"{sw}: no loadBalancerSourceRanges: list the workshop's networks (never every address)"):
                external_ranges.append(ranges)
    problems.require(kinds == {"headless", "clusterip"},
                     f"need a ClusterIP and a headless Service selecting the pods; found {sorted(kinds) or 'none'}")

    pdbs = [p for p in by_kind.get("PodDisruptionBudget", []) if selector_matches(dig(p, "spec", "selector"), pod_labels)]
    problems.require(pdbs, "no PodDisruptionBudget selects the pods")

    # NetworkPolicy: gRPC only from labelled cohort namespaces/pods, metrics only from monitoring.
    policies = [p for p in by_kind.get("NetworkPolicy", [])
                if selector_matches(dig(p, "spec", "podSelector"), pod_labels)]
    problems.require(any(dig(p, "spec", "podSelector") == {} and "Ingress" in dig(p, "spec", "policyTypes", default=[])
                         and not dig(p, "spec", "ingress") for p in by_kind.get("NetworkPolicy", [])),
                     "no default-deny ingress NetworkPolicy (podSelector: {}) in the namespace")
    grpc_ok = metrics_ok = False
    for pol in policies:
        pw = f'NetworkPolicy/{pol["metadata"]["name"]}'
        for rule in dig(pol, "spec", "ingress") or []:
            rports = {p.get("port") for p in rule.get("ports") or []}
            peers = rule.get("from")
            if not problems.require(rports, f"{pw}: an ingress rule without ports admits every port"):
                continue
            if not problems.require(peers, f"{pw}: an ingress rule without from admits every source"):
                continue
            rports_named = {next((n for n, v in ports.items() if v == p), p) for p in rports}
            for peer in peers:
                # Addresses only for the external load balancer's clients (components/external): on
                # the gRPC port, the Service's own source ranges, client addresses kept (Local).
                if "ipBlock" in peer:
                    cidrs = sorted(p["ipBlock"].get("cidr") for p in peers if "ipBlock" in p)
                    problems.require(rports_named == {"grpc"} and cidrs in external_ranges,
                                     f"{pw}: ipBlock {cidrs} on ports {sorted(map(str, rports))}: addresses are admitted only to "
                                     f"the grpc port, equal to an external LoadBalancer Service's loadBalancerSourceRanges "
                                     f"(externalTrafficPolicy: Local); found {external_ranges or 'none'}")
                    continue
                ns_sel = peer.get("namespaceSelector")
                problems.require(ns_sel != {}, f"{pw}: namespaceSelector {{}} admits every namespace")
                problems.require(not (ns_sel is None and peer.get("podSelector") == {}),
                                 f"{pw}: podSelector {{}} admits every pod of the namespace")
            if rports_named == {"grpc"}:
                # The cohort: namespaces named by kubernetes.io/metadata.name, or labelled pods of this one.
                for peer in peers:
                    ns_sel = peer.get("namespaceSelector")
                    if "ipBlock" in peer:
                        continue
                    if ns_sel is not None:
                        names = namespace_names(ns_sel)
                        if problems.require(names is not None,
                                            f"{pw}: gRPC admitted from namespaces {json.dumps(ns_sel, sort_keys=True)}: select "
                                            f"the cohort by {NAME_LABEL} alone (any other label is whatever a namespace's editor set)"):
                            problems.require(names <= COHORT_NAMESPACES,
                                             f"{pw}: gRPC admitted from namespaces {sorted(names - COHORT_NAMESPACES)}, "
                                             f"not only the cohort's {sorted(COHORT_NAMESPACES)}")
                    else:
                        problems.require(dig(peer, "podSelector", "matchLabels"),
                                         f"{pw}: gRPC admitted from unlabelled pods of the namespace")
                grpc_ok = True
            elif rports_named == {"metrics"}:
                admitted = set()
                for peer in peers:
                    names = set()
                    for e in dig(peer, "namespaceSelector", "matchExpressions") or []:
                        if e["key"] == "kubernetes.io/metadata.name" and e["operator"] == "In":
                            names.update(e.get("values") or [])
                        else:
                            names.add(f"{e['key']} {e['operator']}")
                    for key, value in (dig(peer, "namespaceSelector", "matchLabels") or {}).items():
                        names.add(value if key == "kubernetes.io/metadata.name" else f"{key}={value}")
                    if peer.get("namespaceSelector") is None:
                        names.add("this namespace")
                    admitted |= names
                problems.require("gmp-system" in admitted,
                                 f"{pw}: metrics must be admitted from gmp-system (GMP collectors)")
                problems.require(admitted <= MONITORING_NAMESPACES,
                                 f"{pw}: metrics admitted from {sorted(admitted - MONITORING_NAMESPACES)}, not only"
                                 f" the monitoring namespaces {sorted(MONITORING_NAMESPACES)}")
                metrics_ok = True
            else:
                problems.add(f"{pw}: ingress rule for ports {sorted(map(str, rports))}: expected grpc or metrics alone")
    problems.require(grpc_ok, "no NetworkPolicy rule admits the cohort to the grpc port")
    problems.require(metrics_ok, "no NetworkPolicy rule admits monitoring to the metrics port")
    # Egress: the server calls nothing but the cluster's DNS.
    egress_policies = [p for p in policies if "Egress" in (dig(p, "spec", "policyTypes") or [])]
    problems.require(egress_policies, f"no NetworkPolicy limits {SERVER}'s egress (policyTypes: [Egress])")
    for pol in egress_policies:
        for rule in dig(pol, "spec", "egress") or []:
            why = egress_rule_problem(rule, allow_server=False)
            problems.require(not why, f'NetworkPolicy/{pol["metadata"]["name"]}: {why}')

    # Scrape targets exist.
    scrapers = 0
    for pm in by_kind.get("PodMonitoring", []):
        scrapers += 1
        pw = f'PodMonitoring/{pm["metadata"]["name"]}'
        problems.require(selector_matches(dig(pm, "spec", "selector"), pod_labels), f"{pw}: selector misses the pods")
        for ep in dig(pm, "spec", "endpoints") or []:
            problems.require(ep.get("port") in ("metrics", ports.get("metrics")), f"{pw}: port {ep.get('port')} is not metrics")
    for sm in by_kind.get("ServiceMonitor", []):
        scrapers += 1
        sw = f'ServiceMonitor/{sm["metadata"]["name"]}'
        matched = [s for s in services if selector_matches(dig(sm, "spec", "selector"), dig(s, "metadata", "labels"))]
        problems.require(matched, f"{sw}: selector matches no Service")
        for ep in dig(sm, "spec", "endpoints") or []:
            with_port = [s for s in matched if any(p.get("name") == ep.get("port") for p in dig(s, "spec", "ports") or [])]
            problems.require(len(with_port) == 1,
                             f"{sw}: port {ep.get('port')} must be on exactly one selected Service (found {len(with_port)})")

    # prometheus-operator selects both kinds by the same labels (release, for kube-prometheus-stack):
    # a rule object the Prometheus does not pick up would leave the alerts silently unevaluated.
    operator_objects = by_kind.get("ServiceMonitor", []) + by_kind.get("PrometheusRule", [])
    releases = {(o["kind"], dig(o, "metadata", "labels", "release")) for o in operator_objects}
    problems.require(len({r for _, r in releases}) <= 1,
                     f"ServiceMonitor and PrometheusRule carry different release labels: {sorted(releases, key=str)}")

    # Alert thresholds that depend on flags.
    if flags and args.rules:
        rules = [r for g in yaml.safe_load(open(args.rules))["groups"] for r in g["rules"]]
        depth = int(flags.get("queue_depth", 64))
        for r in rules:
            if r.get("alert") == "AttnQueueSaturated":
                m = re.search(r">=?\s*([0-9.]+)\s*$", r["expr"].strip())
                if problems.require(m, "AttnQueueSaturated: expected `... >= N`"):
                    problems.require(float(m.group(1)) < depth,
                                     f"AttnQueueSaturated fires at {m.group(1)}, at or above --queue_depth={depth}: it can never fire")

    return problems.report(f"{where}: placement, security, probes on :{probe_port}, drain ({dig(c, 'lifecycle', 'preStop', 'sleep', 'seconds')}+"
                           f"{flags.get('shutdown_grace_s', '?')} s in {spec.get('terminationGracePeriodSeconds')} s), "
                           f"TLS {'on' if tls_on else 'off'}, tokens {'from a Secret' if flags.get('tokens_file') else 'off'}, "
                           f"PriorityClass {pc_name}, {len(services)} Services, {len(policies)} NetworkPolicies (DNS-only egress), "
                           f"{scrapers} scrape objects consistent; {material}"
                           + (f"; {cohort_summary}" if cohort_summary else ""))


# --- the cohort: identity, quotas, isolation ---------------------------------------------------

def namespace_names(ns_sel):
    """The namespaces a namespaceSelector selects by kubernetes.io/metadata.name alone, or None
    where it selects by any other label (or selects every namespace)."""
    if not ns_sel:
        return None
    labels, exprs = ns_sel.get("matchLabels") or {}, ns_sel.get("matchExpressions") or []
    if set(labels) - {NAME_LABEL} or any(e.get("key") != NAME_LABEL or e.get("operator") != "In" for e in exprs):
        return None
    sets = ([{labels[NAME_LABEL]}] if NAME_LABEL in labels else []) + [set(e.get("values") or []) for e in exprs]
    return set.intersection(*sets) if sets else None


def _port_set(rule):
    return {(str(p.get("port")), p.get("protocol", "TCP")) for p in rule.get("ports") or []}


def egress_rule_problem(rule, allow_server):
    """Why an egress rule allows more than the cluster's DNS (kube-system's kube-dns pods on 53
    UDP/TCP) or, with allow_server, attn-server's gRPC port; "" when it does not."""
    peers, ports = rule.get("to"), _port_set(rule)
    if not peers:
        return f"an egress rule to every destination (ports {sorted({p for p, _ in ports}) or 'all'}), not only the cluster DNS"
    if not ports:
        return "an egress rule without ports allows every port"
    for peer in peers:
        if "ipBlock" in peer:
            return f"egress to ipBlock {peer['ipBlock'].get('cidr')}: only the cluster DNS{' and attn-server' if allow_server else ''}"
        names = namespace_names(peer.get("namespaceSelector"))
        pods = dig(peer, "podSelector", "matchLabels") or {}
        if names == {"kube-system"} and pods == DNS_PEER["podSelector"]["matchLabels"]:
            if not ports <= {("53", "UDP"), ("53", "TCP")}:
                return f"egress to kube-dns on ports {sorted(ports)}: DNS is 53 UDP/TCP"
        elif allow_server and names == {SERVER_NAMESPACE} and pods.get("app.kubernetes.io/name") == SERVER:
            if not ports <= {("50051", "TCP"), ("grpc", "TCP")}:
                return f"egress to {SERVER} on ports {sorted(ports)}: only its gRPC port (50051)"
        else:
            return (f"egress to {json.dumps(peer, sort_keys=True)}: only the cluster DNS (kube-system pods k8s-app=kube-dns, "
                    f"named by {NAME_LABEL}){' and attn-server pods in namespace ' + SERVER_NAMESPACE if allow_server else ''}")
    return ""


def secret_mounts(flags, cw, mounts, volumes, cm_name, problems):
    """The tokens file and the TLS key and certificate are files of Secret volumes, mounted whole
    and read-only, from the Secrets the host's scripts make; never in the flags ConfigMap."""
    problems.require(flags.get("tokens_file"), f"ConfigMap/{cm_name}: no --tokens_file: the cohort's server must know its participants")
    problems.require(flags.get("tls_cert_file") and flags.get("tls_key_file"),
                     f"ConfigMap/{cm_name}: no --tls_cert_file and --tls_key_file: the cohort's tokens must not cross the network in plaintext")
    wanted = {"tokens_file": TOKENS_SECRET, "tls_cert_file": TLS_SECRET, "tls_key_file": TLS_SECRET,
              "tls_client_ca_file": None}
    for flag, secret in wanted.items():
        path = flags.get(flag)
        if not path:
            continue
        directory, key = path.rsplit("/", 1) if "/" in path else ("", path)
        mount = mounts.get(directory)
        volume = volumes.get(mount["name"], {}) if mount else {}
        name = dig(volume, "secret", "secretName")
        if not problems.require(name, f"{cw}: --{flag}={path}: {directory or '.'} is not where a Secret volume is mounted "
                                      f"(tokens and keys live in Secrets, never in a ConfigMap or the image)"):
            continue
        problems.require(secret is None or name == secret,
                         f"{cw}: --{flag}={path} is in Secret {name}, not {secret} (the name scripts/"
                         f"{'mint-tokens.sh' if secret == TOKENS_SECRET else 'make-cohort-ca.sh'} writes)")
        items = dig(volume, "secret", "items")
        problems.require(not items or key in {i.get("path") for i in items}, f"{cw}: --{flag}={path}: no item {key} in volume {mount['name']}")
    for path, mount in mounts.items():
        volume = volumes.get(mount["name"], {})
        if "secret" not in volume:
            continue
        sw = f"{cw}: Secret {dig(volume, 'secret', 'secretName')} at {path}"
        problems.require(mount.get("readOnly") is True, f"{sw} must be mounted readOnly")
        problems.require(not mount.get("subPath"), f"{sw} is a subPath mount, which the kubelet never updates: a new "
                                                   f"tokens file would not reach the server until a restart")
        mode = dig(volume, "secret", "defaultMode", default=0o644)
        problems.require(mode & 0o007 == 0, f"{sw}: defaultMode {mode:o} lets any user of the container read it")


# The largest case an admin may run (the large suite's decode B64 T1 S8192 N32 K8 H128 bf16, as
# large as B16 S32768): q and out (B*T*N*H), k and v (B*S*K*H).
LARGEST_CASE_MIB = (2 * (64 * 1 * 32 * 128) + 2 * (64 * 8192 * 8 * 128)) * 2 >> 20
L4_ARENA_MAX_MIB = 20 * 1024  # an L4 has 24 GiB; CUDA contexts, cuDNN and cuBLAS need the rest


def cohort_flag_problems(flags, where, problems):
    """Flags that must agree for a shared device: two workers at least, a participant never on all
    of them, each worker's arena big enough, the per-participant quotas inside the server's caps."""
    def num(name, default):
        return float(flags.get(name, default))
    workers = int(num("workers_per_device", 1))
    running = int(num("participant_max_running", 0)) or max(1, workers - 1)
    problems.require(workers >= 2, f"{where}: --workers_per_device={workers}: one participant's task would hold the "
                                   f"device's only worker; a cohort's server needs at least 2")
    problems.require(running < workers or workers < 2,
                     f"{where}: --participant_max_running={running} lets one participant hold all {workers} workers")
    arena, request = num("arena_mib", 4096), num("max_request_mib", 64)
    per_worker, need = arena / max(workers, 1), 2 * request + LARGEST_CASE_MIB
    problems.require(per_worker >= need,
                     f"{where}: --arena_mib={arena:g} over {workers} workers leaves {per_worker:g} MiB each; a worker needs "
                     f"{need:g} MiB (2 x --max_request_mib for an Attend's inputs and output, and {LARGEST_CASE_MIB} MiB for "
                     f"the large suite's biggest case)")
    problems.require(arena <= L4_ARENA_MAX_MIB, f"{where}: --arena_mib={arena:g} is more than an L4 can pin "
                                                f"({L4_ARENA_MAX_MIB} MiB, beside CUDA's own memory)")
    queued, depth = num("participant_max_queued", 16), num("queue_depth", 64)
    problems.require(4 * queued <= depth, f"{where}: --participant_max_queued={queued:g}: four participants could fill "
                                          f"a device's --queue_depth={depth:g}; keep it at most a quarter")
    job, max_job = num("participant_max_job_seconds", 180), num("max_job_seconds", 600)
    device_s, window = num("participant_device_seconds", 300), num("participant_window_s", 600)
    problems.require(job <= max_job, f"{where}: --participant_max_job_seconds={job:g} above --max_job_seconds={max_job:g}")
    problems.require(job <= device_s, f"{where}: --participant_max_job_seconds={job:g} above --participant_device_seconds="
                                      f"{device_s:g}: a participant's largest job could never be admitted")
    problems.require(device_s <= window * running,
                     f"{where}: --participant_device_seconds={device_s:g} is more than {running} worker(s) can give in "
                     f"--participant_window_s={window:g}")
    for name, default in (("participant_max_inflight", 8), ("participant_max_jobs", 2)):
        problems.require(num(name, default) >= 1, f"{where}: --{name} must be at least 1")


def material_problems(docs, problems):
    """No ConfigMap holds a token, a tokens-file line or a private key, and no Secret with data is
    part of a render: those come from the host's folder (mint-tokens.sh, make-cohort-ca.sh)."""
    configmaps = 0
    for doc in docs:
        name = f'{doc["kind"]}/{dig(doc, "metadata", "name")}'
        if doc["kind"] == "ConfigMap":
            configmaps += 1
            for key, value in {**(doc.get("data") or {}), **(doc.get("binaryData") or {})}.items():
                for pattern, what in ((TOKEN_RE, "a bearer token"), (TOKENS_LINE_RE, "a tokens-file line (NAME SHA256)"),
                                      (PRIVATE_KEY_RE, "a private key")):
                    problems.require(not pattern.search(str(value)),
                                     f"{name} key {key}: holds {what}; tokens and keys belong in Secrets made by "
                                     f"scripts/mint-tokens.sh and scripts/make-cohort-ca.sh")
        elif doc["kind"] == "Secret":
            problems.require(not doc.get("data") and not doc.get("stringData"),
                             f"{name}: a Secret with data in the repository's manifests; tokens and keys come from the "
                             f"host's folder (scripts/mint-tokens.sh, scripts/make-cohort-ca.sh), applied with kubectl")
    return f"no token or key material in {configmaps} ConfigMaps"


QUANTITY_SUFFIX = {"m": 1e-3, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
                   "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(value):
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(value))
    if not m or m.group(2) not in QUANTITY_SUFFIX:
        raise ValueError(f"not a quantity: {value!r}")
    return float(m.group(1)) * QUANTITY_SUFFIX[m.group(2)]


def cohort_policy(by_kind, ns, problems):
    """The cohort's namespace: a ResourceQuota with no GPUs and CPU and memory bounded, none of
    attn-server's PriorityClass; a LimitRange that gives every container requests and limits;
    default-deny NetworkPolicies with egress only to DNS and attn-server (and, for the
    JupyterHub there, between its named pods and from the hub to the API server); and the
    workloads there inside both, with room left for client pods."""
    def in_ns(kind):
        return [o for o in by_kind.get(kind, []) if dig(o, "metadata", "namespace", default=ns) == ns]
    quotas = in_ns("ResourceQuota")
    plain = {}
    for q in quotas:
        if not dig(q, "spec", "scopeSelector") and not dig(q, "spec", "scopes"):
            for res, v in (dig(q, "spec", "hard") or {}).items():
                plain[res] = min(quantity(v), plain.get(res, float("inf")))
    gpu = plain.get("requests.nvidia.com/gpu")
    problems.require(gpu == 0, f"namespace {ns}: no ResourceQuota sets requests.nvidia.com/gpu: 0 "
                               f"({'it allows ' + format(gpu, 'g') if gpu is not None else 'GPUs unbounded'}); the L4s are attn-server's")
    bounded = ("requests.cpu", "limits.cpu", "requests.memory", "limits.memory")
    for res in bounded:
        problems.require(res in plain, f"namespace {ns}: no ResourceQuota bounds {res}")
    problems.require(any(dig(q, "spec", "hard", "pods") in ("0", 0)
                         and any(e.get("scopeName") == "PriorityClass" and e.get("operator") == "In"
                                 and PRIORITY_CLASS in (e.get("values") or [])
                                 for e in dig(q, "spec", "scopeSelector", "matchExpressions") or [])
                         for q in quotas),
                     f"namespace {ns}: no ResourceQuota keeps pods of PriorityClass {PRIORITY_CLASS} out (scopeSelector "
                     f"PriorityClass In [{PRIORITY_CLASS}], pods: 0)")

    limits = [l for lr in in_ns("LimitRange") for l in dig(lr, "spec", "limits") or [] if l.get("type") == "Container"]
    lr = limits[0] if limits else {}
    if problems.require(limits, f"namespace {ns}: no LimitRange for containers (the quota needs every pod's requests and limits)"):
        for res in ("cpu", "memory") + (("ephemeral-storage",) if any("ephemeral-storage" in r for r in plain) else ()):
            for section in ("default", "defaultRequest", "max"):
                problems.require(dig(lr, section, res) is not None, f"namespace {ns}: LimitRange has no {section}.{res}")

    policies = in_ns("NetworkPolicy")
    problems.require(any(dig(p, "spec", "podSelector") == {} and set(dig(p, "spec", "policyTypes") or []) >= {"Ingress", "Egress"}
                         and not dig(p, "spec", "ingress") and not dig(p, "spec", "egress") for p in policies),
                     f"namespace {ns}: no default-deny NetworkPolicy (podSelector: {{}}, Ingress and Egress, no rules)")
    for pol in policies:
        for rule in dig(pol, "spec", "egress") or []:
            why = egress_rule_problem(rule, allow_server=True)
            peers = rule.get("to") or []
            # Within the namespace: named pods on named ports (the hub and the notebook servers,
            # each direction checked by the jupyterhub check).
            if peers and _port_set(rule) and all(set(p) == {"podSelector"} and dig(p, "podSelector", "matchLabels") for p in peers):
                why = ""
            # The Kubernetes API server's one address on 443, for the hub alone (KubeSpawner).
            if dig(pol, "spec", "podSelector", "matchLabels") == {"app.kubernetes.io/name": HUB} and _port_set(rule) == {("443", "TCP")} \
                    and all(set(p) == {"ipBlock"} and p["ipBlock"].get("cidr", "").endswith("/32") for p in peers):
                why = ""
            problems.require(not why, f'NetworkPolicy/{pol["metadata"]["name"]} in {ns}: {why}')

    # The workloads here fit the LimitRange and, all replicas together, the quota.
    used = {}
    for kind in ("Deployment", "StatefulSet", "Pod"):
        for obj in in_ns(kind):
            ow = f'{kind}/{obj["metadata"]["name"]}'
            spec = dig(obj, "spec", "template", "spec") if kind != "Pod" else obj.get("spec")
            replicas = dig(obj, "spec", "replicas", default=1) if kind != "Pod" else 1
            used["pods"] = used.get("pods", 0) + replicas
            for c in (spec or {}).get("containers") or []:
                for section in ("requests", "limits"):
                    for res in ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu"):
                        v = dig(c, "resources", section, res)
                        if v is None and lr:
                            v = dig(lr, "defaultRequest" if section == "requests" else "default", res)
                        if v is None:
                            continue
                        problems.require(res not in (lr.get("max") or {}) or quantity(v) <= quantity(lr["max"][res]),
                                         f"{ow} container {c.get('name')}: {section}.{res} {v} above the LimitRange's max {dig(lr, 'max', res)}")
                        used[f"{section}.{res}"] = used.get(f"{section}.{res}", 0) + replicas * quantity(v)
    room = []
    for res, hard in plain.items():
        if res in used:
            problems.require(used[res] <= hard, f"namespace {ns}: its workloads need {res} {used[res]:g}, over the quota's {hard:g}")
    # How many participants' client pods (LimitRange defaults) still fit beside them.
    if lr and used:
        per_pod = {"pods": 1}
        for section, key in (("requests", "defaultRequest"), ("limits", "default")):
            for res, v in (lr.get(key) or {}).items():
                per_pod[f"{section}.{res}"] = quantity(v)
        fits = min(int((plain[r] - used.get(r, 0)) // v) for r, v in per_pod.items() if r in plain and v > 0)
        problems.require(fits >= 5, f"namespace {ns}: only {fits} client pods at the LimitRange's defaults fit the quota beside its workloads")
        room.append(f"{fits} more client pods fit")
    return (f"namespace {ns}: quota with no GPUs and {', '.join(bounded)} bounded, LimitRange, default-deny with egress to "
            f"DNS and {SERVER} only" + (f", its workloads inside the quota ({', '.join(room)})" if room else ""))


# --- rules -------------------------------------------------------------------------------------

class _Literal(str):
    pass


def _literal_representer(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")


def _str_representer(dumper, data):
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


# kube-prometheus-stack's Prometheus picks up ServiceMonitors and PrometheusRules by its Helm
# release label; the ServiceMonitor carries the same (policy checks that the two agree).
OPERATOR_RELEASE = "kube-prometheus-stack"


def rule_object(api, kind, groups):
    labels = {"app.kubernetes.io/name": SERVER}
    if kind == "PrometheusRule":
        labels["release"] = OPERATOR_RELEASE
    return {"apiVersion": api, "kind": kind,
            "metadata": {"name": SERVER, "namespace": "attn", "labels": labels},
            "spec": {"groups": groups}}


def cmd_rules_sync(args):
    canonical = pathlib.Path(args.canonical)
    groups = yaml.safe_load(open(canonical))["groups"]
    problems = Problems()
    targets = RULE_OBJECTS
    if args.objects:  # other copies (the negative tests): compare the groups only
        targets = {pathlib.Path(p).resolve(): (None, None) for p in args.objects}
    for path, (api, kind) in targets.items():
        rel = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path
        if args.write:
            dumper = yaml.SafeDumper
            dumper.add_representer(str, _str_representer)
            text = (f"# Generated from {canonical.resolve().relative_to(ROOT)} by `scripts/deploy-check.sh --write-rules`;\n"
                    f"# edit that file, not this one (deploy-check.sh fails while the two differ).\n")
            text += yaml.dump(rule_object(api, kind, groups), Dumper=dumper, sort_keys=False, width=1000)
            path.write_text(text)
            continue
        if not path.exists():
            problems.add(f"{rel}: missing (scripts/deploy-check.sh --write-rules makes it)")
            continue
        docs = load_docs(path)
        if not problems.require(len(docs) == 1, f"{rel}: expected one object"):
            continue
        if api:
            problems.require((docs[0].get("apiVersion"), docs[0].get("kind")) == (api, kind),
                             f"{rel}: expected {api} {kind}")
        if dig(docs[0], "spec", "groups") != groups:
            problems.add(f"{rel}: spec.groups differ from {canonical.name}; run scripts/deploy-check.sh --write-rules")
    if args.write:
        return problems.report(f"wrote {len(targets)} rule objects from {canonical.name}")
    return problems.report(f"{len(targets)} rule objects hold the {sum(len(g['rules']) for g in groups)} rules of {canonical.name}")


QUANTILE_RE = re.compile(r"histogram_quantile\s*\(")


def quantile_problems(expr, where):
    """histogram_quantile must read buckets summed across replicas: sum by (le, ...) (rate(x_bucket[..]))."""
    out = []
    for m in QUANTILE_RE.finditer(expr):
        depth, i = 1, m.end()
        while i < len(expr) and depth:
            depth += {"(": 1, ")": -1}.get(expr[i], 0)
            i += 1
        inner = expr[m.end():i - 1]
        agg = re.search(r"\bsum\s+by\s*\(([^)]*)\)\s*\(\s*(?:rate|increase)\s*\(\s*[a-zA-Z_:][a-zA-Z0-9_:]*_bucket\b", inner)
        if not agg or "le" not in [x.strip() for x in agg.group(1).split(",")]:
            out.append(f"{where}: histogram_quantile must take sum by (le, ...) (rate(<histogram>_bucket[...])): {inner.strip()[:90]}")
        elif re.search(r"\bpod\b|\binstance\b", agg.group(1)):
            out.append(f"{where}: histogram_quantile keeps pod/instance: quantiles must aggregate across replicas")
    return out


def cmd_rules_policy(args):
    problems = Problems()
    groups = yaml.safe_load(open(args.rules))["groups"]
    alerts = []
    for g in groups:
        for r in g["rules"]:
            name = r.get("record") or r.get("alert")
            for p in quantile_problems(r["expr"], name):
                problems.add(p)
            if "alert" in r:
                alerts.append(r["alert"])
                problems.require(dig(r, "labels", "severity") in ("critical", "warning", "info"),
                                 f"{name}: needs labels.severity critical, warning or info")
                problems.require(dig(r, "annotations", "summary") and dig(r, "annotations", "description"),
                                 f"{name}: needs summary and description annotations")
    wanted = {"AttnNoReadyReplica", "AttnHighErrorRatio", "AttnQueueSaturated", "AttnHighLatencyP99"}
    problems.require(wanted <= set(alerts), f"missing alerts: {sorted(wanted - set(alerts))}")
    if args.tests:
        tested = set()
        for t in yaml.safe_load(open(args.tests))["tests"]:
            for a in t.get("alert_rule_test") or []:
                if a.get("exp_alerts"):
                    tested.add(a["alertname"])
        problems.require(set(alerts) <= tested, f"alerts without a firing unit test: {sorted(set(alerts) - tested)}")
    return problems.report(f"{len(alerts)} alerts with severity and annotations, each with a firing test; "
                           f"quantiles aggregate buckets across replicas")


# --- terraform ---------------------------------------------------------------------------------

def _clean(value):
    """python-hcl2 keeps quotes around strings and keys and adds __meta__ keys; drop both."""
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items() if not (isinstance(k, str) and k.startswith("__"))}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


REQUIRED_VARIABLES = ["project_id", "region", "zone", "cluster_name", "machine_type", "gpu_type", "gpu_count",
                      "gpu_driver_version"]
REQUIRED_OUTPUTS = ["get_credentials_command"]


def cmd_terraform(args):
    import hcl2

    problems = Problems()
    tf_dir = pathlib.Path(args.dir)
    files = sorted(tf_dir.glob("*.tf"))
    if not problems.require(files, f"{tf_dir}: no .tf files"):
        return problems.report("")
    variables, outputs, resources, blocks, texts = {}, {}, {}, {}, {}
    for path in files:
        text = path.read_text()
        texts[path.name] = text
        try:
            parsed = _clean(hcl2.loads(text))
        except Exception as e:  # the parser's own error types vary by version
            problems.add(f"{path.name}: HCL parse error: {str(e).splitlines()[0][:200]}")
            continue
        for block in parsed.get("variable", []):
            variables.update(block)
        for block in parsed.get("output", []):
            outputs.update(block)
        for block in parsed.get("resource", []):
            for rtype, named in block.items():
                for rname, body in named.items():
                    resources[f"{rtype}.{rname}"] = body
        for key in ("terraform", "provider", "locals"):
            blocks.setdefault(key, []).extend(parsed.get(key, []))
    if problems.items:
        return problems.report("")

    for name in REQUIRED_VARIABLES:
        problems.require(name in variables, f"variable {name} is missing (the codelab's names)")
    for name in REQUIRED_OUTPUTS:
        problems.require(name in outputs, f"output {name} is missing (the codelab's names)")
    defaults = {n: v.get("default") for n, v in variables.items()}
    problems.require(defaults.get("gpu_type") == "nvidia-l4", "variable gpu_type must default to nvidia-l4")
    problems.require(defaults.get("machine_type") == "g2-standard-8", "variable machine_type must default to g2-standard-8")
    problems.require(defaults.get("gpu_count") == 1, "variable gpu_count must default to 1")
    gpu_count_rules = " ".join(v.get("condition", "") for v in variables.get("gpu_count", {}).get("validation", []))
    problems.require("var.machine_type" in gpu_count_rules, "variable gpu_count needs a validation against machine_type")
    # Every variable a tfvars file may set wrongly is validated before anything is created.
    for name, body in sorted(variables.items()):
        if body.get("type") != "bool":
            problems.require(body.get("validation"), f"variable {name} has no validation")

    # Every var./resource reference is declared (no provider schema offline, but typos show here).
    alltext = "\n".join(texts.values())
    for ref in sorted(set(re.findall(r"\bvar\.([a-zA-Z0-9_]+)", alltext))):
        problems.require(ref in variables, f"var.{ref} is used but not declared")
    declared_types = {r.split(".")[0] for r in resources}
    for rtype, rname in sorted(set(re.findall(r"\b(google_[a-z0-9_]+)\.([a-z0-9_]+)\b", alltext))):
        if rtype in declared_types or f"{rtype}.{rname}" in resources:
            problems.require(f"{rtype}.{rname}" in resources, f"{rtype}.{rname} is referenced but not declared")

    def find(rtype):
        return [body for key, body in resources.items() if key.startswith(rtype + ".")]

    clusters = find("google_container_cluster")
    if problems.require(len(clusters) == 1, "expected one google_container_cluster"):
        cl = clusters[0]
        problems.require(dig(cl, "workload_identity_config", 0, "workload_pool"), "cluster: Workload Identity is off")
        mon = dig(cl, "monitoring_config", 0) or {}
        problems.require(dig(mon, "managed_prometheus", 0, "enabled") is True, "cluster: Managed Prometheus is off")
        problems.require("DCGM" in (mon.get("enable_components") or []), "cluster: DCGM metrics are off")
        problems.require(cl.get("datapath_provider") == "ADVANCED_DATAPATH",
                         "cluster: Dataplane V2 (ADVANCED_DATAPATH) is off: NetworkPolicies would not be enforced")
    pools = find("google_container_node_pool")
    gpu_pools = [p for p in pools if dig(p, "node_config", 0, "guest_accelerator")]
    cpu_pools = [p for p in pools if not dig(p, "node_config", 0, "guest_accelerator")]
    problems.require(cpu_pools, "no CPU node pool (system and monitoring pods)")
    if problems.require(len(gpu_pools) == 1, "expected one GPU node pool"):
        nc = dig(gpu_pools[0], "node_config", 0)
        acc = dig(nc, "guest_accelerator", 0)
        problems.require(nc.get("machine_type") == "${var.machine_type}", "GPU pool: machine_type is not var.machine_type")
        problems.require(acc.get("type") == "${var.gpu_type}" and acc.get("count") == "${var.gpu_count}",
                         "GPU pool: guest_accelerator must use var.gpu_type and var.gpu_count")
        driver = dig(acc, "gpu_driver_installation_config", 0, "gpu_driver_version")
        problems.require(driver, "GPU pool: gpu_driver_installation_config.gpu_driver_version is not set")
        problems.require(dig(nc, "workload_metadata_config", 0, "mode") == "GKE_METADATA",
                         "GPU pool: workload_metadata_config mode must be GKE_METADATA")
    problems.require(find("google_artifact_registry_repository"), "no Artifact Registry repository")

    # The node driver must run the image's CUDA: CUDA 13 needs R580, which GKE installs as LATEST.
    dockerfile = ROOT / "Dockerfile"
    if args.dockerfile:
        dockerfile = pathlib.Path(args.dockerfile)
    m = re.search(r"^ARG CUDA_VERSION=(\d+)\.", dockerfile.read_text(), re.M) if dockerfile.exists() else None
    if problems.require(m, f"{dockerfile}: no ARG CUDA_VERSION=<major>.<minor>..."):
        cuda_major = int(m.group(1))
        if cuda_major >= 13:
            problems.require(defaults.get("gpu_driver_version") == "LATEST",
                             f"the image is CUDA {cuda_major} (needs an R580 driver) but gpu_driver_version defaults to "
                             f"{defaults.get('gpu_driver_version')!r}, not LATEST")

    return problems.report(f"{len(files)} files parse; {len(variables)} variables (codelab's {len(REQUIRED_VARIABLES)} "
                           f"present, validated), {len(outputs)} outputs, {len(resources)} resources, references declared, "
                           f"driver {defaults.get('gpu_driver_version')} for the image's CUDA")


# --- metric names ------------------------------------------------------------------------------

PROMQL_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
                   "offset", "bool", "inf", "nan", "atan2", "start", "end"}


def promql_metric_names(expr):
    s = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    s = re.sub(r"'(?:\\.|[^'\\])*'", "''", s)
    s = re.sub(r"`[^`]*`", "", s)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    s = re.sub(r"\boffset\s+-?\S+", " ", s)
    s = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_]\w*", " ", s)
    s = re.sub(r"(?<![A-Za-z0-9_:])[0-9][0-9.]*(?:[eE][+-]?[0-9]+)?", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        if re.match(r"\s*\(", s[m.end():]) or m.group(0) in PROMQL_KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def dashboard_queries(dash):
    """(where, expr) for every panel target and query variable of a Grafana dashboard."""
    out = []

    def panels(items):
        for p in items:
            yield p
            yield from panels(p.get("panels") or [])

    for p in panels(dash.get("panels") or []):
        for t in p.get("targets") or []:
            if t.get("expr"):
                out.append((f'panel "{p.get("title")}" {t.get("refId")}', t["expr"]))
    for v in dig(dash, "templating", "list", default=[]):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if not q:
            continue
        m = re.fullmatch(r"\s*label_values\(\s*(.+?)\s*,\s*[A-Za-z_]\w*\s*\)\s*", q)
        out.append((f'variable "{v.get("name")}"', m.group(1) if m else q))
    return out


def read_list(path):
    return [line.split() for line in open(path) if line.strip() and not line.lstrip().startswith("#")]


def expected_names(path):
    names = set()
    for name, mtype in read_list(path):
        names.add(name)
        if mtype == "histogram":
            names.update({name + "_bucket", name + "_sum", name + "_count"})
        elif mtype == "summary":
            names.update({name + "_sum", name + "_count"})
    return names


def cmd_metric_names(args):
    problems = Problems()
    known = expected_names(args.expected)
    external = {row[0] for row in read_list(args.external)} if args.external else set()
    recorded, uses = set(), []
    for path in args.rules or []:
        for g in yaml.safe_load(open(path))["groups"]:
            for r in g["rules"]:
                if "record" in r:
                    recorded.add(r["record"])
                uses.append((f'{pathlib.Path(path).name}: {r.get("record") or r.get("alert")}', r["expr"]))
    for path in args.dashboard or []:
        try:
            dash = json.load(open(path))
        except json.JSONDecodeError as e:
            problems.add(f"{path}: not JSON: {e}")
            continue
        uses += [(f"{pathlib.Path(path).name}: {w}", e) for w, e in dashboard_queries(dash)]
    used = set()
    for where, expr in uses:
        for name in sorted(promql_metric_names(expr)):
            used.add(name)
            problems.require(name in known or name in recorded or name in external,
                             f"{where}: metric {name} is not in {pathlib.Path(args.expected).name}, not recorded by a rule, "
                             f"and not external")
    attn_used = sorted(n for n in used if n in known)
    summary = (f"{len(uses)} queries name {len(used)} metrics: {len(attn_used)} attn-server series, "
               f"{len(used & recorded)} recorded, {len(used & external)} external; all known")
    if args.scrape:
        sources = {}  # recorded name -> the scraped metrics its rule reads (transitively)
        for path in args.rules or []:
            for g in yaml.safe_load(open(path))["groups"]:
                for r in g["rules"]:
                    if "record" in r:
                        sources[r["record"]] = promql_metric_names(r["expr"])
        checked = check_against_scrape(problems, uses, recorded, external, sources, args.scrape)
        summary += f"; {checked} in the real scrape {pathlib.Path(args.scrape).name}, with every label and value matched"
    return problems.report(summary)


# Labels Prometheus (or GMP) attaches to every series of a scrape target; not in /metrics itself.
TARGET_LABELS = {"cluster", "namespace", "pod", "instance", "job", "container", "node", "location",
                 "project_id", "service", "endpoint"}


def parse_scrape(path):
    """{sample name: {label: {values}}} of a Prometheus text-format scrape."""
    series = {}
    for line in open(path):
        if not line.strip() or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s", line)
        if not m:
            continue
        labels = series.setdefault(m.group(1), {})
        for lm in re.finditer(r'([A-Za-z_]\w*)="((?:\\.|[^"\\])*)"', m.group(2) or ""):
            labels.setdefault(lm.group(1), set()).add(lm.group(2))
    return series


def check_against_scrape(problems, uses, recorded, external, sources, scrape_path):
    """Every attn-server metric a query names is in the real scrape, and every label it matches
    on or aggregates by is one that metric has (or a target label), with a value the scrape
    shows for an exact matcher. Returns how many distinct metrics were checked."""
    series = parse_scrape(scrape_path)
    name = pathlib.Path(scrape_path).name

    def base_metrics(metric, seen=()):
        if metric in recorded and metric not in seen:
            out = set()
            for m in sources.get(metric, ()):
                out |= base_metrics(m, seen + (metric,))
            return out
        return {metric}

    checked = set()
    for where, expr in uses:
        names = promql_metric_names(expr)
        bases = set()
        for n in names:
            bases |= base_metrics(n)
        if bases & external:
            continue  # DCGM's labels are not ours to check
        for b in sorted(bases):
            checked.add(b)
            problems.require(b in series, f"{where}: metric {b} is not in the real scrape {name}")
        available = set(TARGET_LABELS) | {"le"}
        for b in bases:
            available |= set(series.get(b, {}))
        stripped = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
        for grouping in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", stripped):
            for label in re.findall(r"[A-Za-z_]\w*", grouping.group(1)):
                problems.require(label in available, f"{where}: aggregates by label {label}, which "
                                 f"{', '.join(sorted(bases))} do not have in {name}")
        for sel in re.finditer(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}", expr):
            labels = {}
            for b in base_metrics(sel.group(1)):
                for k, v in series.get(b, {}).items():
                    labels.setdefault(k, set()).update(v)
            for mm in re.finditer(r'([A-Za-z_]\w*)\s*(=~|!~|!=|=)\s*"((?:\\.|[^"\\])*)"', sel.group(2)):
                label, op, value = mm.groups()
                if label in TARGET_LABELS:
                    continue
                if not problems.require(label in labels, f"{where}: {sel.group(1)} has no label {label} in {name}"):
                    continue
                if op in ("=", "!=") and "$" not in value:
                    problems.require(value in labels[label],
                                     f'{where}: {sel.group(1)}{{{label}{op}"{value}"}}: {label} is never "{value}" in '
                                     f"{name} (seen: {', '.join(sorted(labels[label]))})")
    return len(checked)


# --- dashboard ---------------------------------------------------------------------------------

def cmd_dashboard(args):
    problems = Problems()
    try:
        dash = json.load(open(args.file))
    except json.JSONDecodeError as e:
        problems.add(f"{args.file}: not JSON: {e}")
        return problems.report("")
    for key in ("title", "uid", "schemaVersion", "panels"):
        problems.require(key in dash, f"dashboard has no {key}")
    problems.require(dash.get("id") is None, "dashboard id must be absent or null (provisioning assigns it)")
    ds_vars = [v for v in dig(dash, "templating", "list", default=[]) if v.get("type") == "datasource"]
    problems.require(ds_vars and ds_vars[0].get("query") == "prometheus",
                     "needs a Prometheus data source variable (works with GMP or any Prometheus)")
    ds_ref = "${%s}" % ds_vars[0]["name"] if ds_vars else None
    ids, cells, panels = set(), {}, 0
    for p in dash.get("panels") or []:
        title = p.get("title")
        if not problems.require(p.get("id") not in ids, f'panel "{title}": duplicate id {p.get("id")}'):
            continue
        ids.add(p.get("id"))
        g = p.get("gridPos") or {}
        if not problems.require(all(k in g for k in "hwxy") and g["x"] + g["w"] <= 24,
                                f'panel "{title}": gridPos must have h, w, x, y within 24 columns'):
            continue
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.add(f'panel "{title}" overlaps panel "{cells[(x, y)]}"')
                else:
                    cells[(x, y)] = title
        if p.get("type") == "row":
            continue
        panels += 1
        problems.require(dig(p, "datasource", "uid") == ds_ref, f'panel "{title}": data source must be {ds_ref}')
        targets = p.get("targets") or []
        problems.require(targets, f'panel "{title}": no queries')
        refs = [t.get("refId") for t in targets]
        problems.require(len(refs) == len(set(refs)), f'panel "{title}": duplicate refIds')
        for t in targets:
            problems.require(t.get("expr"), f'panel "{title}" {t.get("refId")}: empty query')
            for q in quantile_problems(t.get("expr", ""), f'panel "{title}" {t.get("refId")}'):
                problems.add(q)
            opened = t.get("expr", "").count("(") - t.get("expr", "").count(")")
            problems.require(opened == 0, f'panel "{title}" {t.get("refId")}: unbalanced parentheses')
    # Deduplicate overlap messages (one per pair is enough).
    problems.items = list(dict.fromkeys(problems.items))
    return problems.report(f"{panels} panels, unique ids, no overlaps, data source {ds_ref}, "
                           f"quantiles over buckets summed across replicas")


# --- scrape ------------------------------------------------------------------------------------

def cmd_scrape(args):
    problems = Problems()
    types, samples = {}, set()
    for line in open(args.file):
        if line.startswith("# TYPE "):
            parts = line.split()
            if len(parts) >= 4:
                types[parts[2]] = parts[3]
        elif line.strip() and not line.startswith("#"):
            samples.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    expected = read_list(args.expected)
    for name, mtype in expected:
        family = name
        if mtype == "counter" and name not in types and name.endswith("_total"):
            family = name[: -len("_total")]  # the text format may name the counter family without _total
        if not problems.require(family in types, f"{name}: no `# TYPE` line in the scrape"):
            continue
        problems.require(types[family] == mtype, f"{name}: scraped as {types[family]}, expected {mtype}")
        wanted = {name + "_bucket", name + "_count", name + "_sum"} if mtype == "histogram" else {name}
        if args.require_samples:
            problems.require(wanted <= samples, f"{name}: no samples for {sorted(wanted - samples)}")
    extra = sorted(n for n in types if n.startswith("attn_") and n not in {e[0] for e in expected}
                   and n + "_total" not in {e[0] for e in expected})
    summary = f"{len(expected)} expected families present in {pathlib.Path(args.file).name} with their types"
    if extra:
        summary += f"; not used by the dashboard or rules: {', '.join(extra)}"
    return problems.report(summary)


# --- server flags ------------------------------------------------------------------------------

def cmd_server_flags(args):
    problems = Problems()
    flags = parse_flagfile(open(args.flagfile).read())
    run = subprocess.run([args.binary, "--helpfull"], capture_output=True, text=True, timeout=60)
    known = set(re.findall(r"^\s+--([a-z0-9_]+)", run.stdout + run.stderr, re.M))
    if not problems.require(known, f"{args.binary} --helpfull listed no flags"):
        return problems.report("")
    for name in flags:
        problems.require(name in known, f"{args.flagfile}: --{name} is not a flag of {pathlib.Path(args.binary).name}")
    return problems.report(f"{len(flags)} flags of {pathlib.Path(args.flagfile).name} known to {pathlib.Path(args.binary).name}")


# --- dockerfile --------------------------------------------------------------------------------

def dockerfile_stages(path):
    """(instruction lines with continuations joined, stages): each stage {"from": image,
    "lines": [(INSTRUCTION, rest), ...]}."""
    lines, buf = [], ""
    for raw in path.read_text().splitlines():
        if raw.lstrip().startswith("#") and not buf:
            continue
        buf += raw.rstrip("\\").strip() + " " if raw.rstrip().endswith("\\") else raw.strip()
        if not raw.rstrip().endswith("\\"):
            if buf.strip():
                lines.append(buf.strip())
            buf = ""
    stages = []
    for line in lines:
        word, _, rest = line.partition(" ")
        if word.upper() == "FROM":
            stages.append({"from": rest.split()[0], "lines": []})
        elif stages:
            stages[-1]["lines"].append((word.upper(), rest))
    return lines, stages


def cmd_dockerfile(args):
    problems = Problems()
    path = pathlib.Path(args.file)
    lines, stages = dockerfile_stages(path)
    if not problems.require(len(stages) >= 2, f"{path.name}: needs a build stage and a runtime stage"):
        return problems.report("")
    problems.require("cudnn-devel" in stages[0]["from"], f"{path.name}: the first stage must be a CUDA + cuDNN devel image")
    problems.require("cudnn-runtime" in stages[-1]["from"], f"{path.name}: the final stage must be a CUDA + cuDNN runtime image")
    text = "\n".join(line for line in lines)
    problems.require(re.search(r"^COPY .*scripts/apt-packages\.txt", text, re.M) and
                     re.search(r"^RUN .*scripts/deps\.sh", text, re.M),
                     f"{path.name}: the build must install scripts/apt-packages.txt through scripts/deps.sh")
    problems.require(not re.search(r"apt-get install", text),
                     f"{path.name}: installs packages by name; use scripts/apt-packages.txt so the lists cannot drift")
    final = stages[-1]["lines"]
    users = [rest for word, rest in final if word == "USER"]
    problems.require(users and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", users[-1].strip()),
                     f"{path.name}: the final stage must end as a numeric non-root USER (runAsNonRoot checks it)")
    copies = [rest for word, rest in final if word == "COPY"]
    problems.require(copies and all(c.startswith("--from=") for c in copies),
                     f"{path.name}: the final stage copies only from earlier stages (binaries and libraries)")
    problems.require(any("attn-server" in rest for word, rest in final if word == "ENTRYPOINT"),
                     f"{path.name}: ENTRYPOINT must be attn-server")
    build = "\n".join(rest for _, rest in stages[0]["lines"])
    for binary in ("attn-server", "attn-client"):
        problems.require(binary in build, f"{path.name}: the build stage does not build {binary}")
    problems.require("CMAKE_CUDA_ARCHITECTURES=89" in build, f"{path.name}: build for the L4 (CMAKE_CUDA_ARCHITECTURES=89)")
    if args.flags:
        flags = parse_flagfile(open(args.flags).read())
        exposed = {int(p.split("/")[0]) for word, rest in final if word == "EXPOSE" for p in rest.split()}
        want = {port_of(flags.get("listen_address", ":50051")), port_of(flags.get("metrics_address", ":9464"))}
        problems.require(want <= exposed, f"{path.name}: EXPOSE {sorted(exposed)} lacks the flag file's ports {sorted(want)}")
    ignore = path.with_name(".dockerignore")
    sources = []
    if problems.require(ignore.exists(), ".dockerignore is missing"):
        entries = {line.strip() for line in ignore.read_text().splitlines()}
        for entry in (".git", ".deps", "build*"):
            problems.require(entry in entries, f".dockerignore should exclude {entry}")
        # Every source file the image's CMake configure names must be in the build context, or
        # `cmake` fails in the build stage ("Cannot find source file").
        patterns = dockerignore_patterns(ignore.read_text())
        sources = cmake_sources(skip_tests="-DATTN_BUILD_TESTS=OFF" in build)
        for cmakelists, source in sources:
            if not (ROOT / source).exists():
                problems.add(f"{cmakelists} names {source}, which does not exist")
            elif dockerignored(source, patterns):
                problems.add(f"{cmakelists} names {source}, which .dockerignore leaves out of the build context")
    return problems.report(f"{len(stages)} stages ({stages[0]['from']} -> {stages[-1]['from']}), packages from "
                           f"scripts/apt-packages.txt, USER {users[-1] if users else '?'}, the two binaries only; "
                           f"the {len(sources)} sources CMake names are in the build context")


# --- the cohort's JupyterHub -------------------------------------------------------------------

HUB = "attn-hub"
HUB_CONFIG = ROOT / "deploy/jupyterhub/jupyterhub_config.py"
HUB_TLS_SECRET = "attn-hub-tls"
# Placeholders an overlay replaces: the images' names, documentation address ranges (RFC 5737).
IMAGE_PLACEHOLDERS = {"attn-hub", "attn-notebook", "attn-server"}
DOC_RANGES = ("192.0.2.", "198.51.100.", "203.0.113.")
OPEN_RANGES = {"0.0.0.0/0", "::/0"}
DIGEST_RE = re.compile(r"^[^@\s]+@sha256:[0-9a-f]{64}$")
# What attn_client reads from ATTN_TARGET inside the cluster: a Service's DNS name and port.
SERVICE_TARGET = re.compile(r"^(?:dns:///)?(?P<svc>[a-z0-9-]+)\.(?P<ns>[a-z0-9-]+)\.svc(?:\.cluster\.local)?:(?P<port>[0-9]+)$")


def image_problem(image, require_digest):
    """Why an image reference is not pinned: by digest, or (in the repository's bases) a
    placeholder name that the host's overlay replaces with one."""
    if DIGEST_RE.match(image or ""):
        return ""
    if not require_digest and image in IMAGE_PLACEHOLDERS:
        return ""
    return f"image {image!r} is not pinned by digest (name@sha256:...)"


def open_range_problems(docs, require_filled, problems):
    """LoadBalancers and Ingresses admit a list of source ranges, none of them every address; with
    require_filled (the host's overlay), no documentation placeholder either."""
    for doc in docs:
        name = f'{doc["kind"]}/{dig(doc, "metadata", "name")}'
        ranges = []
        if doc["kind"] == "Service" and dig(doc, "spec", "type") == "LoadBalancer":
            ranges = dig(doc, "spec", "loadBalancerSourceRanges") or []
            problems.require(ranges, f"{name}: a LoadBalancer without loadBalancerSourceRanges is open to every address")
        elif doc["kind"] == "Ingress":
            allow = dig(doc, "metadata", "annotations", "nginx.ingress.kubernetes.io/whitelist-source-range") or ""
            ranges = [r.strip() for r in allow.split(",") if r.strip()]
            problems.require(ranges, f"{name}: an Ingress without a source allow-list (whitelist-source-range) is open to every address")
        elif doc["kind"] == "NetworkPolicy":
            ranges = [p["ipBlock"].get("cidr") for r in dig(doc, "spec", "ingress") or [] for p in r.get("from") or [] if "ipBlock" in p]
            ranges += [p["ipBlock"].get("cidr") for r in dig(doc, "spec", "egress") or [] for p in r.get("to") or [] if "ipBlock" in p]
        for r in ranges:
            problems.require(r not in OPEN_RANGES, f"{name}: {r} admits every address; list the workshop's networks")
            problems.require(not (require_filled and r.startswith(DOC_RANGES)),
                             f"{name}: {r} is the repository's placeholder (a documentation range); your overlay sets the real one")


def hub_user_pod(config_text, hub_env, user, work):
    """KubeSpawner's pod and home volume for `user`, made by the deployed jupyterhub_config.py
    (`config_text`) with the hub container's environment, as the hub makes them; no cluster is
    contacted."""
    import asyncio
    import os
    from traitlets.config.loader import PyFileConfigLoader

    work.mkdir(parents=True, exist_ok=True)
    (work / HUB_CONFIG.name).write_text(config_text)
    (work / "participants.txt").write_text(f"{user} participant\nhost admin\n")
    (work / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "none",
        "clusters": [{"name": "none", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "none", "user": {}}],
        "contexts": [{"name": "none", "context": {"cluster": "none", "user": "none"}}]}))
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in hub_env.items() if v is not None})
    os.environ.update({"ATTN_HUB_PARTICIPANTS": str(work / "participants.txt"), "KUBECONFIG": str(work / "kubeconfig")})
    try:
        config = PyFileConfigLoader(HUB_CONFIG.name, path=str(work)).load_config()
        from kubernetes_asyncio.client import ApiClient
        from kubespawner import KubeSpawner

        class MockUser:
            name, id, url, escaped_name = user, 1, f"/user/{user}/", user
            settings = {}

        async def make():
            spawner = KubeSpawner(config=config, user=MockUser(), _mock=True)
            api = ApiClient()
            try:
                return (config, api.sanitize_for_serialization(await spawner.get_pod_manifest()),
                        api.sanitize_for_serialization(spawner.get_pvc_manifest()))
            finally:
                await api.close()
        return asyncio.run(make())
    finally:
        os.environ.clear()
        os.environ.update(saved)


def cmd_jupyterhub(args):
    """deploy/jupyterhub: the hub's pod, its public side (HTTPS, redirect, source ranges), its
    Role, and the participants' pods as KubeSpawner makes them from the deployed config:
    restricted, no service-account token, the participant's own token from their Secret, the
    attn service and CA, isolated from each other by the NetworkPolicies, inside the cohort's
    LimitRange and quota; every image pinned; the two images' Dockerfiles."""
    docs, server_docs = load_docs(args.render), load_docs(args.server_render)
    problems = Problems()
    deps = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == HUB]
    if not problems.require(deps, f"no {HUB} Deployment in {args.render}"):
        return problems.report("")
    dep = deps[0]
    where = f"Deployment/{HUB}"
    ns_name = dep["metadata"].get("namespace", "default")
    pod_labels = dig(dep, "spec", "template", "metadata", "labels") or {}
    spec = dep["spec"]["template"]["spec"]
    problems.require(selector_matches(dep["spec"].get("selector"), pod_labels), f"{where}: spec.selector does not match the pod's labels")
    c = next((c for c in spec.get("containers") or [] if c.get("name") == "hub"), None)
    if not problems.require(c, f"{where}: no container named hub"):
        return problems.report("")
    cw = f"{where} container hub"
    psc, csc = spec.get("securityContext") or {}, c.get("securityContext") or {}
    problems.require(psc.get("runAsNonRoot") is True and isinstance(psc.get("runAsUser"), int) and psc["runAsUser"] > 0,
                     f"{where}: pod securityContext needs runAsNonRoot: true and a numeric non-root runAsUser")
    problems.require(dig(psc, "seccompProfile", "type") == "RuntimeDefault", f"{where}: pod seccompProfile must be RuntimeDefault")
    problems.require(csc.get("allowPrivilegeEscalation") is False and "ALL" in (dig(csc, "capabilities", "drop") or [])
                     and not dig(csc, "capabilities", "add") and csc.get("privileged") is not True,
                     f"{cw}: must not escalate, and must drop ALL capabilities")
    problems.require(csc.get("readOnlyRootFilesystem") is True, f"{cw}: readOnlyRootFilesystem must be true")
    for section in ("requests", "limits"):
        for res in ("cpu", "memory"):
            problems.require(dig(c, "resources", section, res) is not None, f"{cw}: no {section}.{res}")
    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
    for probe in ("readinessProbe", "livenessProbe"):
        port = dig(c, probe, "httpGet", "port")
        problems.require(port in ports or port in ports.values(), f"{cw}: {probe} must httpGet a port of the pod")
    hub_env = {e["name"]: e.get("value") for e in c.get("env") or []}
    problems.require(not any(TOKEN_RE.search(str(v)) for v in hub_env.values()), f"{cw}: a token in the hub's environment")
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts") or []}

    def volume_at(path):
        m = mounts.get(path)
        return (volumes.get(m["name"], {}), m) if m else ({}, {})

    # The deployed config is the repository's file, from the ConfigMap the entrypoint reads.
    cm_vol, _ = volume_at("/etc/attn/hub")
    cms = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == dig(cm_vol, "configMap", "name")]
    config_text = dig(cms[0], "data", HUB_CONFIG.name, default="") if cms else ""
    if not problems.require(config_text, f"{cw}: no {HUB_CONFIG.name} in a ConfigMap mounted at /etc/attn/hub (the entrypoint's --config)"):
        return problems.report("")
    tls_vol, tls_mount = volume_at(hub_env.get("ATTN_HUB_TLS_DIR") or "")
    problems.require(dig(tls_vol, "secret", "secretName") == HUB_TLS_SECRET and tls_mount.get("readOnly") is True,
                     f"{cw}: ATTN_HUB_TLS_DIR must be Secret {HUB_TLS_SECRET} mounted readOnly (the HTTPS certificate)")
    mode = dig(tls_vol, "secret", "defaultMode", default=0o644)
    problems.require(mode & 0o007 == 0, f"{cw}: Secret {HUB_TLS_SECRET}: defaultMode {mode:o} lets any user of the container read the key")
    part_vol, _ = volume_at(str(pathlib.PurePosixPath(hub_env.get("ATTN_HUB_PARTICIPANTS") or "/x/y").parent))
    problems.require(dig(part_vol, "configMap", "name") == "attn-hub-participants",
                     f"{cw}: ATTN_HUB_PARTICIPANTS must be a file of ConfigMap attn-hub-participants (scripts/mint-tokens.sh)")
    data_vol, _ = volume_at(hub_env.get("ATTN_HUB_DATA_DIR") or "")
    problems.require("persistentVolumeClaim" in data_vol, f"{cw}: ATTN_HUB_DATA_DIR must be a PersistentVolumeClaim (the hub's database)")

    # Its Role: pods and volumes in its namespace, never Secrets; no cluster-wide binding.
    for rb in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        if any(s.get("name") == spec.get("serviceAccountName") for s in rb.get("subjects") or []):
            problems.require(rb["kind"] == "RoleBinding", f"ClusterRoleBinding/{rb['metadata']['name']}: the hub's rights stay in its namespace")
            role = next((r for r in docs if r["kind"] == "Role" and r["metadata"]["name"] == dig(rb, "roleRef", "name")), {})
            for rule in role.get("rules") or []:
                problems.require(not {"secrets", "*"} & set(rule.get("resources") or []),
                                 f"Role/{dig(role, 'metadata', 'name')}: the hub may read Secrets; the kubelet alone gives each pod its token")

    # The public side: HTTPS from the listed ranges, the redirect, the certificate.
    open_range_problems(docs, args.require_filled, problems)
    lbs = [s for s in docs if s["kind"] == "Service" and dig(s, "spec", "type") == "LoadBalancer"
           and selector_matches({"matchLabels": dig(s, "spec", "selector") or {}}, pod_labels)]
    lb_ranges = []
    if problems.require(len(lbs) == 1, f"need one LoadBalancer Service for the hub's pods; found {len(lbs)}"):
        lb = lbs[0]
        sw = f"Service/{lb['metadata']['name']}"
        lb_ranges = sorted(dig(lb, "spec", "loadBalancerSourceRanges") or [])
        problems.require(dig(lb, "spec", "externalTrafficPolicy") == "Local",
                         f"{sw}: externalTrafficPolicy must be Local, or the NetworkPolicy sees node addresses, not browsers'")
        by_target = {p.get("targetPort"): p.get("port") for p in dig(lb, "spec", "ports") or []}
        public = {ports.get(t, t) for t in by_target}
        problems.require(public == {ports.get("https"), ports.get("http-redirect")},
                         f"{sw}: must carry the pod's https and http-redirect ports alone; carries {sorted(map(str, by_target))}")
        problems.require(str(by_target.get("https")) == "443" and hub_env.get("ATTN_HUB_REDIRECT_TO") == "443",
                         f"{sw}: HTTPS on 443, and ATTN_HUB_REDIRECT_TO ({hub_env.get('ATTN_HUB_REDIRECT_TO')}) must send browsers there")
        problems.require(hub_env.get("ATTN_HUB_PUBLIC_PORT") == str(ports.get("https"))
                         and hub_env.get("ATTN_HUB_REDIRECT_PORT") == str(ports.get("http-redirect")),
                         f"{cw}: ATTN_HUB_PUBLIC_PORT / ATTN_HUB_REDIRECT_PORT are not the ports https / http-redirect")
    policies = [p for p in docs if p["kind"] == "NetworkPolicy"]
    for pol in policies:
        if not selector_matches(dig(pol, "spec", "podSelector"), pod_labels):
            continue
        for rule in dig(pol, "spec", "ingress") or []:
            cidrs = sorted(p["ipBlock"].get("cidr") for p in rule.get("from") or [] if "ipBlock" in p)
            if cidrs:
                rports = {ports.get(p.get("port"), p.get("port")) for p in rule.get("ports") or []}
                problems.require(cidrs == lb_ranges and rports <= {ports.get("https"), ports.get("http-redirect")},
                                 f"NetworkPolicy/{pol['metadata']['name']}: ipBlock {cidrs} on {sorted(map(str, rports))}: addresses "
                                 f"reach the hub's public ports only, the same as the LoadBalancer's {lb_ranges}")
    api_svc = [s for s in docs if s["kind"] == "Service" and dig(s, "spec", "type", default="ClusterIP") == "ClusterIP"
               and selector_matches({"matchLabels": dig(s, "spec", "selector") or {}}, pod_labels)]
    m = re.match(r"^http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc(?:\.cluster\.local)?:([0-9]+)$", hub_env.get("ATTN_HUB_CONNECT_URL") or "")
    problems.require(m and any(s["metadata"]["name"] == m[1] and m[2] == ns_name
                               and any(str(p.get("port")) == m[3] and p.get("targetPort") == "hub-api" for p in dig(s, "spec", "ports") or [])
                               for s in api_svc),
                     f"{cw}: ATTN_HUB_CONNECT_URL {hub_env.get('ATTN_HUB_CONNECT_URL')!r} is not a Service of the hub's hub-api port")

    # Every image pinned: the hub's, and the notebook image the spawner starts.
    for doc in docs:
        for ctr in (dig(doc, "spec", "template", "spec", "containers") or []) + (dig(doc, "spec", "template", "spec", "initContainers") or []):
            why = image_problem(ctr.get("image"), args.require_filled)
            problems.require(not why, f'{doc["kind"]}/{doc["metadata"]["name"]} container {ctr.get("name")}: {why}')

    # A participant's pod, as KubeSpawner makes it from the deployed config.
    try:
        config, pod, pvc = hub_user_pod(config_text, hub_env, "alice", pathlib.Path(args.work))
    except Exception as e:  # the config does not load, or KubeSpawner refuses it
        problems.add(f"{HUB_CONFIG.name}: KubeSpawner could not make a participant's pod: {type(e).__name__}: {e}")
        return problems.report("")
    pw = "KubeSpawner's pod for alice"
    pspec = pod["spec"]
    nb = pspec["containers"][0]
    nsc, npsc = nb.get("securityContext") or {}, pspec.get("securityContext") or {}
    why = image_problem(nb.get("image"), args.require_filled)
    problems.require(not why, f"{pw}: {why} (the hub's ATTN_NOTEBOOK_IMAGE, set by the overlay's images:)")
    problems.require(npsc.get("runAsNonRoot") is True and isinstance(nsc.get("runAsUser"), int) and nsc["runAsUser"] > 0,
                     f"{pw}: must run as a numeric non-root user (runAsNonRoot)")
    problems.require(dig(npsc, "seccompProfile", "type") == "RuntimeDefault", f"{pw}: pod seccompProfile must be RuntimeDefault")
    problems.require(nsc.get("readOnlyRootFilesystem") is True, f"{pw}: readOnlyRootFilesystem must be true")
    problems.require(nsc.get("allowPrivilegeEscalation") is False and "ALL" in (dig(nsc, "capabilities", "drop") or [])
                     and nsc.get("privileged") is not True, f"{pw}: must not escalate, and must drop ALL capabilities")
    problems.require(pspec.get("automountServiceAccountToken") is False,
                     f"{pw}: automountServiceAccountToken must be false (a notebook calls no Kubernetes API)")
    nvols = {v["name"]: v for v in pspec.get("volumes") or []}
    nmounts = {m["mountPath"]: m for m in nb.get("volumeMounts") or []}
    nenv = {e["name"]: e for e in nb.get("env") or []}
    home = "/home/jovyan"
    problems.require(home in nmounts and "persistentVolumeClaim" in nvols.get(nmounts[home]["name"], {}),
                     f"{pw}: {home} must be the participant's own volume (a PersistentVolumeClaim)")
    problems.require("/tmp" in nmounts and "emptyDir" in nvols.get(nmounts["/tmp"]["name"], {}), f"{pw}: /tmp must be an emptyDir (read-only root)")
    token = nenv.get("ATTN_TOKEN", {})
    problems.require(dig(token, "valueFrom", "secretKeyRef") == {"name": "attn-token-alice", "key": "token"} and "value" not in token,
                     f"{pw}: ATTN_TOKEN must come from Secret attn-token-alice key token (scripts/mint-tokens.sh), got {token}")
    problems.require(not any(TOKEN_RE.search(json.dumps(e)) for e in nenv.values()), f"{pw}: a token in the pod's environment")
    ca = (nenv.get("ATTN_TLS_CA_FILE") or {}).get("value") or ""
    ca_mount = nmounts.get(ca.rpartition("/")[0], {})
    problems.require(dig(nvols.get(ca_mount.get("name"), {}), "configMap", "name") == CA_CONFIGMAP and ca_mount.get("readOnly")
                     and ca.endswith("/ca.crt"), f"{pw}: ATTN_TLS_CA_FILE {ca!r} is not ca.crt of ConfigMap {CA_CONFIGMAP}, mounted readOnly")
    for res in ("cpu", "memory"):
        for section in ("requests", "limits"):
            problems.require(dig(nb, "resources", section, res) is not None, f"{pw}: no {section}.{res}")
    problems.require(not dig(nb, "resources", "limits", "nvidia.com/gpu"), f"{pw}: holds a GPU; notebooks send their work to attn-server")
    nb_labels = dig(pod, "metadata", "labels") or {}
    target = (nenv.get("ATTN_TARGET") or {}).get("value") or ""
    admitted_by = target_problems(target, nb_labels, ns_name, docs, server_docs, args.server_render, problems, pw)

    # Isolation: only the hub reaches a notebook server, and a notebook reaches DNS, attn-server
    # and the hub's API alone.
    nb_policies = [p for p in policies if selector_matches(dig(p, "spec", "podSelector"), nb_labels)]
    problems.require(any(dig(p, "spec", "podSelector") == {} and "Ingress" in (dig(p, "spec", "policyTypes") or [])
                         and not dig(p, "spec", "ingress") for p in nb_policies),
                     f"{pw}: no default-deny ingress NetworkPolicy selects it")
    hub_reaches = False
    for pol in nb_policies:
        pn = f"NetworkPolicy/{pol['metadata']['name']}"
        for rule in dig(pol, "spec", "ingress") or []:
            for peer in rule.get("from") or [{}]:
                ok = set(peer) == {"podSelector"} and selector_matches(peer["podSelector"], pod_labels) \
                    and not selector_matches(peer["podSelector"], nb_labels)
                problems.require(ok, f"{pn}: admits {json.dumps(peer, sort_keys=True)} to participants' pods; only the hub may "
                                     f"reach them (never another participant's)")
                hub_reaches = hub_reaches or (ok and any(str(p.get("port")) == "8888" for p in rule.get("ports") or []))
        for rule in dig(pol, "spec", "egress") or []:
            to_hub = all(set(p) == {"podSelector"} and selector_matches(p["podSelector"], pod_labels) for p in rule.get("to") or [{}]) \
                and _port_set(rule) <= {(str(ports.get("hub-api")), "TCP"), ("hub-api", "TCP")} and _port_set(rule)
            why = "" if to_hub else egress_rule_problem(rule, allow_server=True)
            problems.require(not why, f"{pn} (participants' pods): {why}")
    problems.require(hub_reaches, f"{pw}: no NetworkPolicy admits the hub to its port 8888")

    # Inside the LimitRange, and how many participants' pods and home volumes fit the quota beside the hub.
    fits, fit_why = participants_fit(docs, ns_name, pod, pvc, problems)
    problems.require(fits >= args.participants,
                     f"namespace {ns_name}: only {fits} participants' pods fit its quota beside the hub ({fit_why}); want {args.participants}")
    # The pod and its volume claim are valid Kubernetes objects.
    import kubernetes_validate
    for obj in (pod, pvc):
        try:
            kubernetes_validate.validate(obj, args.kube_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.add(f"{pw}: {obj['kind']}: Kubernetes {args.kube_version} schema: {e.message}")

    # The images: the users the pods run as, the pinned packages, the command the spawner runs.
    hub_df, nb_df = pathlib.Path(args.hub_dockerfile), pathlib.Path(args.notebook_dockerfile)
    for path, uid in ((hub_df, psc.get("runAsUser")), (nb_df, nsc.get("runAsUser"))):
        _, stages = dockerfile_stages(path)
        final = stages[-1]["lines"] if stages else []
        users = [rest.strip() for word, rest in final if word == "USER"]
        problems.require(users and re.fullmatch(r"[1-9][0-9]*(:[0-9]+)?", users[-1]) and int(users[-1].split(":")[0]) == uid,
                         f"{path}: the final stage must end as a numeric non-root USER equal to its pod's runAsUser ({uid})")
    reqs = [l.strip() for l in (hub_df.parent / "requirements.txt").read_text().splitlines() if l.strip() and not l.startswith("#")]
    problems.require(reqs and all(re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][A-Za-z0-9.]*", r) for r in reqs),
                     f"{hub_df.parent / 'requirements.txt'}: every package pinned (==)")
    problems.require("node-configurable-http-proxy" in hub_df.read_text(), f"{hub_df}: configurable-http-proxy from Debian's package")
    _, nb_stages = dockerfile_stages(nb_df)
    nb_final = nb_stages[-1]["lines"] if nb_stages else []
    installs = [rest for word, rest in nb_final if word == "RUN" and "pip install" in rest]
    problems.require(installs and all(" -c " in r and "constraints.txt" in r and "^jupyterhub==" in r for r in installs),
                     f"{nb_df}: pip installs take client/python/constraints.txt (-c) and the hub's own jupyterhub pin")
    cmd = config.Spawner.cmd
    problems.require(any(json.dumps(list(cmd)) in rest for word, rest in nb_final if word == "CMD"),
                     f"{nb_df}: CMD must be the spawner's command {list(cmd)}")
    return problems.report(f"{where} in {ns_name}: restricted, HTTPS on 443 from {lb_ranges}, redirect, its Role without Secrets; "
                           f"KubeSpawner's pod: restricted, no service-account token, ATTN_TOKEN from Secret attn-token-alice, "
                           f"{target} over TLS (admitted by NetworkPolicy/{admitted_by or '?'}), reached by the hub alone; "
                           f"{fits} participants fit the quota ({fit_why}); images {'by digest' if args.require_filled else 'pinned or placeholders'}")


def participants_fit(docs, ns, pod, pvc, problems):
    """(how many participants' pods and home volumes fit the namespace's quota beside its other
    workloads, the resource that binds); LimitRange max checked on the participant's pod."""
    quotas = [q for q in docs if q["kind"] == "ResourceQuota" and not dig(q, "spec", "scopeSelector")]
    hard = {}
    for q in quotas:
        for res, v in (dig(q, "spec", "hard") or {}).items():
            hard[res] = min(quantity(v), hard.get(res, float("inf")))
    limit_max = next((l.get("max") or {} for lr in docs if lr["kind"] == "LimitRange" for l in dig(lr, "spec", "limits") or []
                      if l.get("type") == "Container"), {})
    per, used = {"pods": 1, "persistentvolumeclaims": 1,
                 "requests.storage": quantity(dig(pvc, "spec", "resources", "requests", "storage", default=0))}, {}
    for section in ("requests", "limits"):
        for res, v in (dig(pod, "spec", "containers", 0, "resources", section) or {}).items():
            per[f"{section}.{res}"] = quantity(v)
            if res in limit_max and section == "limits":
                problems.require(quantity(v) <= quantity(limit_max[res]),
                                 f"KubeSpawner's pod: limits.{res} {v} above the LimitRange's max {limit_max[res]}")
    for doc in docs:
        if doc["kind"] in ("Deployment", "StatefulSet"):
            n = dig(doc, "spec", "replicas", default=1)
            used["pods"] = used.get("pods", 0) + n
            for ctr in dig(doc, "spec", "template", "spec", "containers") or []:
                for section in ("requests", "limits"):
                    for res, v in (dig(ctr, "resources", section) or {}).items():
                        used[f"{section}.{res}"] = used.get(f"{section}.{res}", 0) + n * quantity(v)
        elif doc["kind"] == "PersistentVolumeClaim":
            used["persistentvolumeclaims"] = used.get("persistentvolumeclaims", 0) + 1
            used["requests.storage"] = used.get("requests.storage", 0) + quantity(dig(doc, "spec", "resources", "requests", "storage"))
    fits = {res: int((hard[res] - used.get(res, 0)) // v) for res, v in per.items() if res in hard and v > 0}
    if not fits:
        return 0, "no quota"
    res = min(fits, key=fits.get)
    return fits[res], f"{res} binds"


def target_problems(target, pod_labels, ns_name, docs, server_docs, server_render, problems, where):
    """ATTN_TARGET is a gRPC port of an attn-server Service whose NetworkPolicy admits this
    namespace, and this namespace's egress policies let the pod out to it. Returns the name of
    the admitting policy ("" if none)."""
    m = SERVICE_TARGET.match(target)
    admitted_by = ""
    if not problems.require(m, f"{where}: ATTN_TARGET {target!r} is not a Service's name:port "
                               f"([dns:///]NAME.NAMESPACE.svc.cluster.local:PORT)"):
        return ""
    svcs = [s for s in server_docs if s["kind"] == "Service" and s["metadata"]["name"] == m["svc"]
            and s["metadata"].get("namespace") == m["ns"]]
    if not problems.require(svcs, f"{where}: ATTN_TARGET names Service {m['ns']}/{m['svc']}, which {server_render} lacks"):
        return ""
    svc_ports = [p for p in dig(svcs[0], "spec", "ports") or [] if str(p.get("port")) == m["port"]]
    problems.require(svc_ports and svc_ports[0].get("targetPort") == "grpc",
                     f"{where}: ATTN_TARGET's port {m['port']} is not a grpc port of Service {m['ns']}/{m['svc']}")
    selector = dig(svcs[0], "spec", "selector") or {}
    ns_objs = [n for n in docs + server_docs if n["kind"] == "Namespace" and n["metadata"]["name"] == ns_name]
    ns_labels = {NAME_LABEL: ns_name, **((dig(ns_objs[0], "metadata", "labels") or {}) if ns_objs else {})}
    for pol in server_docs:
        if pol["kind"] != "NetworkPolicy" or pol["metadata"].get("namespace") != m["ns"] \
                or not selector_matches(dig(pol, "spec", "podSelector"), selector):
            continue
        for rule in dig(pol, "spec", "ingress") or []:
            if "grpc" not in {p.get("port") for p in rule.get("ports") or []}:
                continue
            for peer in rule.get("from") or []:
                if "namespaceSelector" in peer and selector_matches(peer["namespaceSelector"], ns_labels) \
                        and ("podSelector" not in peer or selector_matches(peer["podSelector"], pod_labels)):
                    admitted_by = pol["metadata"]["name"]
    problems.require(admitted_by, f"{where}: namespace {ns_name} (labels {ns_labels}) is not admitted to the gRPC "
                                  f"port of {m['ns']}/{m['svc']} by any NetworkPolicy there")
    egress = [p for p in docs if p["kind"] == "NetworkPolicy" and p["metadata"].get("namespace", ns_name) == ns_name
              and "Egress" in (dig(p, "spec", "policyTypes") or []) and selector_matches(dig(p, "spec", "podSelector"), pod_labels)]
    server_pod = {"app.kubernetes.io/name": SERVER}
    target_port = svc_ports[0].get("targetPort") if svc_ports else None
    problems.require(not egress or any(
        namespace_names(peer.get("namespaceSelector")) == {m["ns"]} and selector_matches(peer.get("podSelector"), server_pod)
        and _port_set(rule) & {(m["port"], "TCP"), (str(target_port), "TCP")}
        for pol in egress for rule in dig(pol, "spec", "egress") or [] for peer in rule.get("to") or []),
        f"{where}: no NetworkPolicy of namespace {ns_name} lets it out to {m['ns']}/{SERVER} on port {m['port']}")
    return admitted_by


def dockerignore_patterns(text):
    """(negated, pattern) pairs of a .dockerignore, in order."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        out.append((neg, line.lstrip("!").strip().strip("/")))
    return out


def dockerignored(rel, patterns):
    """Docker's rule, closely enough for this repository: the last pattern that matches the path
    or one of its parent directories decides (fnmatch's * also crosses "/", a superset of **)."""
    import fnmatch
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for neg, pattern in patterns:
        if any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            excluded = not neg
    return excluded


def cmake_sources(skip_tests):
    """(CMakeLists.txt, repository-relative source) for every literal source file that the tracked
    CMakeLists.txt files give add_library, add_executable or target_sources (tests/ left out when
    the image builds without tests)."""
    lists = subprocess.run(["git", "ls-files", "CMakeLists.txt", "*/CMakeLists.txt"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    out = []
    for rel in lists:
        if skip_tests and rel.startswith("tests/"):
            continue
        here = pathlib.PurePosixPath(rel).parent
        text = "\n".join(line.split("#", 1)[0] for line in (ROOT / rel).read_text().splitlines())
        calls = re.findall(r"\b(?:add_library|add_executable|target_sources)\s*\(([^)]*)\)", text)
        for token in re.split(r"[\s\"]+", " ".join(calls)):
            if not re.search(r"\.(cc|cu|cpp|c|h|proto)$", token):
                continue
            m = re.fullmatch(r"\$\{(PROJECT_SOURCE_DIR|CMAKE_SOURCE_DIR|CMAKE_CURRENT_SOURCE_DIR)\}/(.*)", token)
            if m:
                base = here if m.group(1) == "CMAKE_CURRENT_SOURCE_DIR" else pathlib.PurePosixPath("")
                token = m.group(2)
            elif "$" in token or token.startswith("/"):
                continue  # generated (${CMAKE_CURRENT_BINARY_DIR}/...) or a loop variable
            else:
                base = here
            if "$" in token:
                continue
            out.append((rel, str(base / token)))
    return out


# --- the host's scripts and the repository's secrets ---------------------------------------------

def run_script(cmd, **kw):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)


def file_mode(path):
    return path.stat().st_mode & 0o777


def read_manifest(path):
    docs = load_docs(path)
    return docs[0] if len(docs) == 1 else {}


def server_objects(render):
    """attn-server's Deployment (container, volumes, flags) and its Services, from a render of deploy/."""
    docs = load_docs(render)
    dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == SERVER)
    spec = dep["spec"]["template"]["spec"]
    c = next(c for c in spec["containers"] if c["name"] == SERVER)
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts = {m["mountPath"]: volumes.get(m["name"], {}) for m in c.get("volumeMounts") or []}
    flagfile = next(a for a in c.get("args") or [] if a.startswith("--flagfile=")).split("=", 1)[1]
    cm_name = dig(mounts.get(flagfile.rsplit("/", 1)[0]), "configMap", "name")
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == cm_name)
    flags = parse_flagfile(cm["data"][flagfile.rsplit("/", 1)[1]])
    pod_labels = dig(dep, "spec", "template", "metadata", "labels") or {}
    services = [d for d in docs if d["kind"] == "Service" and dig(d, "spec", "selector")
                and selector_matches({"matchLabels": d["spec"]["selector"]}, pod_labels)]
    return dep, mounts, flags, services


def secret_for(mounts, path):
    """(Secret name, key) that the mounted file `path` comes from."""
    directory, key = path.rsplit("/", 1)
    return dig(mounts.get(directory), "secret", "secretName"), key


def cmd_cohort_scripts(args):
    """scripts/mint-tokens.sh and scripts/make-cohort-ca.sh, run into a temporary folder: their
    files' formats and modes, the hashes against the handed-out tokens, the certificate's names
    against the Services, and the Secrets' names and keys against the Deployment's mounts."""
    problems = Problems()
    work = pathlib.Path(args.work)
    dep, mounts, flags, services = server_objects(args.server_render)
    namespace = dep["metadata"].get("namespace", "default")
    hub_namespace = "attn-cohort"
    if args.hub_render:
        hub_namespace = next((d["metadata"].get("namespace") for d in load_docs(args.hub_render)
                              if d["kind"] == "Deployment" and d["metadata"]["name"] == HUB), hub_namespace)

    # Tokens: mint, check, mint again (add, keep, rotate, remove), check again.
    tdir = work / "tokens"
    state = {}

    def check_tokens(when):
        tokens, handout = tdir / "tokens.txt", tdir / "handout.txt"
        manifest = tdir / f"{TOKENS_SECRET}.secret.yaml"
        for f in (tokens, handout, manifest):
            if not problems.require(f.exists(), f"{when}: {f.name} was not written"):
                return {}
            problems.require(file_mode(f) == 0o600, f"{when}: {f.name} has mode {file_mode(f):o}, not 600")
        problems.require(file_mode(tdir) == 0o700, f"{when}: {tdir.name}/ has mode {file_mode(tdir):o}, not 700")
        lines = {}
        for n, line in enumerate(tokens.read_text().splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            words = line.split()
            ok = len(words) >= 2 and re.fullmatch(r"[A-Za-z0-9._-]{1,64}", words[0]) and re.fullmatch(r"[0-9a-f]{64}", words[1]) \
                and (len(words) < 3 or words[2] in ("participant", "admin") or "=" in words[2])
            if problems.require(ok, f"{when}: tokens.txt line {n} is not NAME SHA256_HEX [ROLE] [key=value ...]: {line!r}"):
                problems.require(words[0] not in lines, f"{when}: tokens.txt names {words[0]} twice")
                lines[words[0]] = words
        handed = {}
        for line in handout.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, token = line.split()
                handed[name] = token
        problems.require(set(handed) == set(lines), f"{when}: handout.txt names {sorted(handed)}, tokens.txt {sorted(lines)}")
        for name, token in handed.items():
            problems.require(TOKEN_RE.fullmatch(token), f"{when}: {name}'s token {token[:8]}... is not attn_ and 43 base64url characters")
            digest = hashlib.sha256(token.encode()).hexdigest()
            problems.require(name in lines and lines[name][1] == digest,
                             f"{when}: tokens.txt's hash for {name} is not the SHA-256 of the token handed out "
                             f"({lines.get(name, ['', '?'])[1][:12]}... vs {digest[:12]}...)")
        problems.require(len(set(handed.values())) == len(handed), f"{when}: two participants share a token")
        problems.require(not TOKEN_RE.search(tokens.read_text()), f"{when}: tokens.txt holds a token, not only hashes")
        secret = read_manifest(manifest)
        problems.require((secret.get("kind"), dig(secret, "metadata", "name"), dig(secret, "metadata", "namespace"))
                         == ("Secret", TOKENS_SECRET, namespace),
                         f"{when}: {manifest.name} is not Secret {namespace}/{TOKENS_SECRET}")
        want_secret, want_key = secret_for(mounts, flags.get("tokens_file", "/tokens.txt"))
        problems.require(want_secret == dig(secret, "metadata", "name"),
                         f"{when}: the Deployment mounts --tokens_file from Secret {want_secret}, the script writes "
                         f"{dig(secret, 'metadata', 'name')}")
        data = dig(secret, "data", want_key)
        problems.require(data and base64.b64decode(data).decode() == tokens.read_text(),
                         f"{when}: the Secret's key {want_key} (--tokens_file's name) is not tokens.txt")
        notebook_problems(tdir, when, lines, handed)
        return {"lines": lines, "handed": handed}

    def notebook_problems(tdir, when, lines, handed):
        """Each participant's Secret attn-token-NAME holds exactly the token handed out to NAME and
        goes to the notebook servers' namespace; the hub's list names them with their roles."""
        secrets_file, list_file = tdir / "attn-notebook-tokens.secret.yaml", tdir / "attn-hub-participants.configmap.yaml"
        for f in (secrets_file, list_file):
            if not problems.require(f.exists(), f"{when}: {f.name} was not written"):
                return
            problems.require(file_mode(f) == 0o600, f"{when}: {f.name} has mode {file_mode(f):o}, not 600")
        secrets = {dig(d, "metadata", "name"): d for d in load_docs(secrets_file)}
        want = {f"attn-token-{n}" for n in handed if re.fullmatch(r"[a-z]([-a-z0-9]{0,46}[a-z0-9])?", n) and "--" not in n}
        problems.require(set(secrets) == want, f"{when}: the notebook Secrets are {sorted(secrets)}, want {sorted(want)}")
        for name, d in secrets.items():
            who = name.removeprefix("attn-token-")
            problems.require(d.get("kind") == "Secret" and dig(d, "metadata", "namespace") == hub_namespace,
                             f"{when}: {name} is not a Secret in {hub_namespace}")
            problems.require(base64.b64decode(dig(d, "data", "token", default="")).decode() == handed.get(who),
                             f"{when}: Secret {name}'s token is not the one handed out to {who}")
        cm = read_manifest(list_file)
        listed = {l.split()[0]: l.split()[1] for l in (dig(cm, "data", "participants.txt") or "").splitlines()
                  if l.strip() and not l.startswith("#")}
        problems.require(dig(cm, "metadata", "name") == "attn-hub-participants" and dig(cm, "metadata", "namespace") == hub_namespace
                         and set(listed) == {s.removeprefix("attn-token-") for s in want},
                         f"{when}: {list_file.name} is not ConfigMap {hub_namespace}/attn-hub-participants naming {sorted(want)}")
        for n, role in listed.items():
            want_role = "admin" if lines.get(n, [None] * 3)[2:3] == ["admin"] else "participant"
            problems.require(role == want_role, f"{when}: participants.txt gives {n} the role {role}, tokens.txt {want_role}")
        problems.require(not TOKEN_RE.search(list_file.read_text()) and not TOKENS_LINE_RE.search(dig(cm, "data", "participants.txt") or ""),
                         f"{when}: {list_file.name} holds a token or a hash")

    rc = run_script([args.mint, tdir, "alice", "bob", "--admin", "host", "--count", "2"])
    if problems.require(rc.returncode == 0, f"mint-tokens.sh failed: {rc.stderr.strip()}"):
        state = check_tokens("first run")
        if state:
            problems.require(dig(state, "lines", "host", default=[None] * 3)[2:3] == ["admin"], "--admin host: not an admin line")
            problems.require({"participant01", "participant02"} <= set(state["lines"]), "--count 2: no participant01, participant02")
    if state:
        rc = run_script([args.mint, tdir, "alice", "carol", "--rotate", "bob", "--remove", "participant02"])
        if problems.require(rc.returncode == 0, f"mint-tokens.sh (second run) failed: {rc.stderr.strip()}"):
            again = check_tokens("second run")
            if again:
                problems.require(again["handed"].get("alice") == state["handed"]["alice"], "second run: alice's token changed")
                problems.require(again["handed"].get("bob") not in (None, state["handed"]["bob"]), "--rotate bob: bob kept the old token")
                problems.require("carol" in again["lines"] and "participant02" not in again["lines"],
                                 "second run: carol not added, or participant02 not removed")
                problems.require(again["lines"].get("host", [None] * 3)[2:3] == ["admin"], "second run: host lost its admin role")
    inside = ROOT / "tests" / "deploy" / ".mint-refused"
    rc = run_script([args.mint, inside, "alice"])
    problems.require(rc.returncode != 0 and not inside.exists(),
                     "mint-tokens.sh wrote into the repository's work tree; it must refuse any folder inside a git work tree")
    if inside.exists():
        shutil.rmtree(inside)

    # TLS: a CA, the server's certificate for every name a client may use, the Secret and the
    # CA's ConfigMap; a second run keeps the CA.
    cdir = work / "tls"
    externals = ["203.0.113.7", "attn.example.org"]
    rc = run_script([args.ca, cdir] + [x for e in externals for x in ("--external", e)])
    names = []
    if problems.require(rc.returncode == 0, f"make-cohort-ca.sh failed: {rc.stderr.strip()}"):
        for f, mode in (("ca.key", 0o600), ("tls.key", 0o600), ("ca.crt", None), ("tls.crt", None)):
            if problems.require((cdir / f).exists(), f"make-cohort-ca.sh wrote no {f}") and mode:
                problems.require(file_mode(cdir / f) == mode, f"{f} has mode {file_mode(cdir / f):o}, not {mode:o}")
        verify = run_script(["openssl", "verify", "-CAfile", cdir / "ca.crt", cdir / "tls.crt"])
        problems.require(verify.returncode == 0, f"tls.crt does not verify against ca.crt: {verify.stdout}{verify.stderr}")
        text = run_script(["openssl", "x509", "-in", cdir / "tls.crt", "-noout", "-text"]).stdout
        m = re.search(r"Subject Alternative Name:.*?\n\s*(.*)\n", text)
        sans = {x.strip().replace("IP Address:", "IP:") for x in m.group(1).split(",")} if m else set()
        for svc in services:
            n, ns = svc["metadata"]["name"], svc["metadata"].get("namespace", namespace)
            names += [n, f"{n}.{ns}", f"{n}.{ns}.svc", f"{n}.{ns}.svc.cluster.local"]
        wanted = {f"DNS:{n}" for n in names} | {"IP:203.0.113.7", "DNS:attn.example.org"}
        problems.require(wanted <= sans, f"tls.crt's names lack {sorted(wanted - sans)} (it has {sorted(sans)})")
        problems.require("TLS Web Server Authentication" in text, "tls.crt is not for server authentication (extendedKeyUsage)")
        ca_text = run_script(["openssl", "x509", "-in", cdir / "ca.crt", "-noout", "-text"]).stdout
        problems.require("CA:TRUE" in ca_text, "ca.crt is not a CA certificate (basicConstraints CA:TRUE)")
        pub_key = run_script(["openssl", "pkey", "-in", cdir / "tls.key", "-pubout"]).stdout
        pub_crt = run_script(["openssl", "x509", "-in", cdir / "tls.crt", "-noout", "-pubkey"]).stdout
        problems.require(pub_key and pub_key == pub_crt, "tls.key is not the key of tls.crt")
        secret = read_manifest(cdir / f"{TLS_SECRET}.secret.yaml")
        problems.require((secret.get("kind"), secret.get("type"), dig(secret, "metadata", "name"), dig(secret, "metadata", "namespace"))
                         == ("Secret", "kubernetes.io/tls", TLS_SECRET, namespace),
                         f"{TLS_SECRET}.secret.yaml is not a kubernetes.io/tls Secret {namespace}/{TLS_SECRET}")
        for flag, f in (("tls_cert_file", "tls.crt"), ("tls_key_file", "tls.key")):
            want_secret, want_key = secret_for(mounts, flags.get(flag, "/" + f))
            problems.require(want_secret == dig(secret, "metadata", "name"),
                             f"the Deployment mounts --{flag} from Secret {want_secret}, the script writes {dig(secret, 'metadata', 'name')}")
            data = dig(secret, "data", want_key)
            problems.require(data and base64.b64decode(data) == (cdir / f).read_bytes(),
                             f"the TLS Secret's key {want_key} (--{flag}'s name) is not {f}")
        cm = read_manifest(cdir / f"{CA_CONFIGMAP}.configmap.yaml")
        problems.require((cm.get("kind"), dig(cm, "metadata", "name")) == ("ConfigMap", CA_CONFIGMAP)
                         and dig(cm, "data", "ca.crt") == (cdir / "ca.crt").read_text()
                         and not PRIVATE_KEY_RE.search(json.dumps(cm)),
                         f"{CA_CONFIGMAP}.configmap.yaml is not ConfigMap {CA_CONFIGMAP} holding ca.crt (and no key)")
        if args.hub_render:
            hdocs = load_docs(args.hub_render)
            hdep = next((d for d in hdocs if d["kind"] == "Deployment" and d["metadata"]["name"] == HUB), {})
            problems.require(dig(cm, "metadata", "namespace") == dig(hdep, "metadata", "namespace"),
                             f"ConfigMap {CA_CONFIGMAP} goes to {dig(cm, 'metadata', 'namespace')}, the notebook servers run in "
                             f"{dig(hdep, 'metadata', 'namespace')}")
            target = next((e.get("value") for c in dig(hdep, "spec", "template", "spec", "containers", default=[])
                           for e in c.get("env") or [] if e["name"] == "ATTN_TARGET"), "")
            host = re.sub(r"^dns:///", "", target).rsplit(":", 1)[0]
            problems.require(f"DNS:{host}" in sans, f"the notebook servers' ATTN_TARGET host {host} is not a name of tls.crt")
        ca_before, crt_before = (cdir / "ca.crt").read_bytes(), (cdir / "tls.crt").read_bytes()
        rc = run_script([args.ca, cdir])
        problems.require(rc.returncode == 0 and (cdir / "ca.crt").read_bytes() == ca_before
                         and (cdir / "tls.crt").read_bytes() != crt_before,
                         "make-cohort-ca.sh again: the CA must stay (participants hold its certificate) and tls.crt be re-issued")
    return problems.report(f"mint-tokens.sh: 5 then 5 participants, modes 600, each hash the SHA-256 of the token handed out, "
                           f"Secret {TOKENS_SECRET} as mounted; make-cohort-ca.sh: keys 600, tls.crt valid for "
                           f"{len(names)} Service names + 2 external, Secret {TLS_SECRET} as mounted, CA kept on a re-run")


def repository_files(root):
    """Files git would commit (tracked, and untracked but not ignored); every file where root is
    not a git work tree."""
    run = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         capture_output=True, text=True)
    if run.returncode == 0 and (root / ".git").exists():
        return [root / p for p in run.stdout.split("\0") if p]
    return [p for p in root.rglob("*") if p.is_file()]


def cmd_no_secrets(args):
    """No token, tokens-file line, private key or Secret with data anywhere in the repository
    (what git would commit), outside the server's and clients' own tests (tests/ but tests/deploy/,
    and client/python/tests/), whose loopback servers may carry throwaway test credentials."""
    problems = Problems()
    root = pathlib.Path(args.root).resolve()
    scanned = 0
    for path in repository_files(root):
        rel = path.relative_to(root).as_posix()
        if (rel.startswith("tests/") and not rel.startswith("tests/deploy/")) or rel.startswith("client/python/tests/"):
            continue
        if not path.is_file():
            continue
        problems.require(path.name not in ("handout.txt", "tokens.txt", "ca.key", "tls.key"),
                         f"{rel}: a file the host's scripts write (mint-tokens.sh, make-cohort-ca.sh) is in the repository")
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        scanned += 1
        for pattern, what in ((TOKEN_RE, "a bearer token (attn_...)"), (TOKENS_LINE_RE, "a tokens-file line (NAME SHA256_HEX)"),
                              (PRIVATE_KEY_RE, "a private key")):
            m = pattern.search(text)
            problems.require(not m, f"{rel}:{text[:m.start()].count(chr(10)) + 1 if m else 0}: holds {what}")
        if path.suffix in (".yaml", ".yml") and re.search(r"^kind:\s*Secret\s*$", text, re.M):
            try:
                docs = list(yaml.safe_load_all(text))
            except yaml.YAMLError:
                docs = []
            for d in docs:
                if isinstance(d, dict) and d.get("kind") == "Secret":
                    problems.require(not d.get("data") and not d.get("stringData"),
                                     f"{rel}: Secret {dig(d, 'metadata', 'name')} with data")
    return problems.report(f"{scanned} files git would commit: no tokens, tokens-file lines, private keys or Secrets with data")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("k8s-schema")
    p.add_argument("render")
    p.add_argument("--kube-versions", default="1.33.0,1.37.0")
    p.set_defaults(fn=cmd_k8s_schema)
    p = sub.add_parser("policy")
    p.add_argument("render")
    p.add_argument("--rules", default=str(CANONICAL_RULES))
    p.set_defaults(fn=cmd_policy)
    p = sub.add_parser("rules-sync")
    p.add_argument("--canonical", default=str(CANONICAL_RULES))
    p.add_argument("--write", action="store_true")
    p.add_argument("objects", nargs="*")
    p.set_defaults(fn=cmd_rules_sync)
    p = sub.add_parser("rules-policy")
    p.add_argument("rules")
    p.add_argument("--tests")
    p.set_defaults(fn=cmd_rules_policy)
    p = sub.add_parser("terraform")
    p.add_argument("dir")
    p.add_argument("--dockerfile")
    p.set_defaults(fn=cmd_terraform)
    p = sub.add_parser("metric-names")
    p.add_argument("--expected", default=str(HERE / "expected_metrics.txt"))
    p.add_argument("--external", default=str(HERE / "external_metrics.txt"))
    p.add_argument("--rules", nargs="*")
    p.add_argument("--dashboard", nargs="*")
    p.add_argument("--scrape", help="a real /metrics scrape of attn-server: every metric and label the "
                   "queries use must be in it")
    p.set_defaults(fn=cmd_metric_names)
    p = sub.add_parser("dashboard")
    p.add_argument("file")
    p.set_defaults(fn=cmd_dashboard)
    p = sub.add_parser("scrape")
    p.add_argument("file")
    p.add_argument("--expected", default=str(HERE / "expected_metrics.txt"))
    p.add_argument("--require-samples", action="store_true",
                   help="also require samples (labelled families have none before their first use)")
    p.set_defaults(fn=cmd_scrape)
    p = sub.add_parser("server-flags")
    p.add_argument("flagfile")
    p.add_argument("binary")
    p.set_defaults(fn=cmd_server_flags)
    p = sub.add_parser("dockerfile")
    p.add_argument("file")
    p.add_argument("--flags")
    p.set_defaults(fn=cmd_dockerfile)
    p = sub.add_parser("cohort-scripts")
    p.add_argument("--mint", default=str(ROOT / "scripts/mint-tokens.sh"))
    p.add_argument("--ca", default=str(ROOT / "scripts/make-cohort-ca.sh"))
    p.add_argument("--server-render", required=True, help="the render of deploy/ (attn-server's mounts, flags, Services)")
    p.add_argument("--hub-render", help="the render of deploy/jupyterhub (its namespace and ATTN_TARGET)")
    p.add_argument("--work", required=True, help="an empty folder outside the repository")
    p.set_defaults(fn=cmd_cohort_scripts)
    p = sub.add_parser("no-secrets")
    p.add_argument("root", nargs="?", default=str(ROOT))
    p.set_defaults(fn=cmd_no_secrets)
    p = sub.add_parser("jupyterhub")
    p.add_argument("render")
    p.add_argument("--server-render", required=True, help="the render of deploy/ (attn-server's Services and policies)")
    p.add_argument("--hub-dockerfile", default=str(ROOT / "deploy/jupyterhub/hub/Dockerfile"))
    p.add_argument("--notebook-dockerfile", default=str(ROOT / "client/python/Dockerfile"))
    p.add_argument("--require-filled", action="store_true",
                   help="a host's overlay: every image by digest, no placeholder address ranges")
    p.add_argument("--participants", type=int, default=20, help="notebook servers the quota must fit")
    p.add_argument("--kube-version", default="1.33.0")
    p.add_argument("--work", required=True, help="an empty folder for KubeSpawner's stand-in kubeconfig")
    p.set_defaults(fn=cmd_jupyterhub)
    args = ap.parse_args()
    sys.exit(args.fn(args))


if __name__ == "__main__":
    main()
