#!/usr/bin/env bash
# Offline checks of the deployment files: Dockerfile, deploy/ (kustomize, Grafana, Prometheus
# rules; the cohort's JupyterHub, its images and the participants' pods KubeSpawner makes from
# its config), terraform/. No
# cluster, cloud account or network is used (beyond installing the tools below when missing).
# One line per check; exits non-zero if any check fails.
#
#   scripts/deploy-check.sh                 run every check (about half a minute once installed)
#   scripts/deploy-check.sh --write-rules   regenerate the GMP Rules / PrometheusRule objects
#                                           from deploy/monitoring/attn.rules.yaml
#
# Environment:
#   ATTN_SERVER_BIN=PATH      attn-server binary (default: build/server/attn-server when it exists).
#                             It is started on the cpu backend with the ConfigMap's flag file
#                             (tests/deploy/scrape_server.py): the Deployment's gRPC probes must see
#                             what Kubernetes needs, and its real GET /metrics, after one Attend and
#                             one benchmark case, must hold every metric, label and label value the
#                             dashboard and rules use. Its --helpfull must know every ConfigMap flag.
#   ATTN_DEPLOY_REQUIRE_SERVER=1
#                             fail (not skip) when there is no attn-server binary; scripts/test.sh
#                             sets it, with the binary it has just built
#   ATTN_METRICS_SCRAPE=FILE  also check a scrape taken elsewhere, e.g. from a pod in the cluster
#                             (kubectl -n attn exec deploy/attn-server -- ... or a port-forward)
#   ATTN_KUBE_VERSIONS=LIST   Kubernetes versions to validate against (default 1.33.0,1.37.0)
#
# Installs what is missing: kubectl (Debian package), promtool (extracted from Debian's
# prometheus package into .deps/prometheus, so no Prometheus service is installed or started),
# and the PyPI packages kubernetes-validate, python-hcl2, grpcio and grpcio-tools (pinned), with
# jupyterhub and jupyterhub-kubespawner at the hub image's pins (deploy/jupyterhub/hub/
# requirements.txt), in a venv at .deps/deploy-venv. terraform is used where it is installed (Debian has no package for it):
# `terraform fmt -check`, and the variable validations run on variables.tf alone (no provider).
#
# The checks are also run on the deliberately broken copies in tests/deploy/broken/ (and a few
# made at run time from the real files), each of which must be rejected for its reason.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
started=$SECONDS

venv=.deps/deploy-venv
checker=(python tests/deploy/deploy_check.py)
scraper=(python tests/deploy/scrape_server.py)
kube_versions=${ATTN_KUBE_VERSIONS:-1.33.0,1.37.0}
rules=deploy/monitoring/attn.rules.yaml
rule_tests=tests/deploy/attn.rules.test.yaml
dashboard=deploy/grafana/attn-dashboard.json
flagfile=deploy/base/attn-server.flags
broken=tests/deploy/broken

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# --- tools -------------------------------------------------------------------------------------
sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
apt_updated=0
apt_get() {
  if [ "$apt_updated" -eq 0 ]; then
    $sudo_cmd apt-get update -qq >/dev/null 2>&1 || true
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get "$@"
}

if ! command -v kubectl >/dev/null 2>&1; then
  echo "deploy-check: installing kubectl"
  apt_get install -y -qq --no-install-recommends kubectl >/dev/null 2>&1 \
    || apt_get install -y -qq --no-install-recommends kubernetes-client >/dev/null 2>&1 || true
fi

promtool=$(command -v promtool || true)
if [ -z "$promtool" ]; then
  promtool=$root/.deps/prometheus/usr/bin/promtool
  if [ ! -x "$promtool" ]; then
    echo "deploy-check: extracting promtool from Debian's prometheus package into .deps/prometheus"
    rm -rf .deps/prometheus && mkdir -p .deps/prometheus/deb
    (cd .deps/prometheus/deb && apt_get download prometheus >/dev/null 2>&1) \
      && dpkg-deb -x .deps/prometheus/deb/prometheus_*.deb .deps/prometheus \
      && rm -rf .deps/prometheus/deb || true
  fi
fi

mapfile -t hub_packages < <(grep -E '^(jupyterhub|jupyterhub-kubespawner)==' deploy/jupyterhub/hub/requirements.txt)
venv_packages=(kubernetes-validate==1.37.0 python-hcl2==8.1.4 grpcio==1.85.1 grpcio-tools==1.85.1 "${hub_packages[@]}")
if ! "$venv/bin/python" -c 'import kubernetes_validate, hcl2, yaml, jsonschema, grpc, grpc_tools, kubespawner' >/dev/null 2>&1 \
    || ! "$venv/bin/python" -m pip freeze 2>/dev/null | grep -qxF "${hub_packages[0]}"; then
  echo "deploy-check: installing ${venv_packages[*]} into $venv"
  rm -rf "$venv" && mkdir -p .deps
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    apt_get install -y -qq --no-install-recommends python3-venv >/dev/null 2>&1
    python3 -m venv "$venv"
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    "${venv_packages[@]}" || { echo "FAIL  tools: pip install failed"; exit 1; }
fi
export PATH="$root/$venv/bin:$PATH"

if [ "${1:-}" = "--write-rules" ]; then
  exec "${checker[@]}" rules-sync --write
fi

# --- reporting ---------------------------------------------------------------------------------
passed=0 failed=0 skipped=0
out=$work/out

indent() { sed -n '1,25s/^/      /p'; }

# check NAME CMD...: passes when CMD exits 0; prints its last line as the detail.
check() {
  local name=$1; shift
  if "$@" >"$out" 2>&1; then
    passed=$((passed + 1))
    printf 'PASS  %s: %s\n' "$name" "$(grep -v '^\s*$' "$out" | tail -1 | cut -c1-160)"
  else
    failed=$((failed + 1))
    printf 'FAIL  %s\n' "$name"
    indent <"$out"
  fi
}

# reject NAME EXPECTED CMD...: a broken input; passes when CMD fails and says EXPECTED.
reject() {
  local name=$1 expected=$2; shift 2
  if "$@" >"$out" 2>&1; then
    failed=$((failed + 1))
    printf 'FAIL  reject %s: the check passed on the broken input\n' "$name"
  elif grep -qF -- "$expected" "$out"; then
    passed=$((passed + 1))
    printf 'PASS  reject %s: %s\n' "$name" "$(grep -F -m1 -- "$expected" "$out" | sed 's/^\s*//' | cut -c1-140)"
  else
    failed=$((failed + 1))
    printf 'FAIL  reject %s: failed, but not with "%s":\n' "$name" "$expected"
    indent <"$out"
  fi
}

skip() {
  skipped=$((skipped + 1))
  printf 'SKIP  %s: %s\n' "$1" "$2"
}

render_and() {  # render_and DIR SUBCOMMAND [ARGS...]: kubectl kustomize DIR, then the checker on it
  local dir=$1; shift
  kubectl kustomize "$dir" >"$work/render.yaml" && "${checker[@]}" "$1" "$work/render.yaml" "${@:2}"
}

# --- tools line --------------------------------------------------------------------------------
kubectl_minor=$(kubectl version --client -o json 2>/dev/null | python -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["minor"].rstrip("+"))' 2>/dev/null || echo 0)
tools_line() {
  command -v kubectl >/dev/null || { echo "kubectl missing (apt-get install kubectl failed)"; return 1; }
  [ "$kubectl_minor" -ge 21 ] || { echo "kubectl 1.$kubectl_minor: its kustomize has no components; need kubectl >= 1.21"; return 1; }
  [ -x "$promtool" ] || { echo "promtool missing (Debian package prometheus)"; return 1; }
  echo "kubectl 1.$kubectl_minor ($(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: //p')), promtool $("$promtool" --version 2>&1 | awk 'NR == 1 { print $3 }'), kubernetes-validate $(python -c 'import kubernetes_validate.version as v; print(v.__version__)'), terraform $(command -v terraform >/dev/null && terraform version 2>/dev/null | awk 'NR == 1 { print $2 }' || echo absent)"
}
check "tools" tools_line

# --- Kubernetes manifests ----------------------------------------------------------------------
mkdir -p "$work/render" "$work/components"
mapfile -t kdirs < <(find deploy -name kustomization.yaml -printf '%h\n' | sort)
for dir in "${kdirs[@]}"; do
  target=$dir
  if grep -q '^kind: Component' "$dir/kustomization.yaml"; then
    # A component renders on top of the base.
    target=$work/components/$(echo "$dir" | tr / _)
    mkdir -p "$target"
    # kustomize takes relative paths only.
    printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\ncomponents:\n  - %s\n' \
      "$(realpath --relative-to "$target" deploy/base)" "$(realpath --relative-to "$target" "$dir")" \
      >"$target/kustomization.yaml"
  fi
  render=$work/render/$(echo "$dir" | tr / _).yaml
  check "render $dir" sh -c "kubectl kustomize '$target' >'$render' && echo \"\$(grep -c '^kind:' '$render') objects\""
  [ -s "$render" ] || continue
  check "schema $dir" "${checker[@]}" k8s-schema "$render" --kube-versions "$kube_versions"
  check "policy $dir" "${checker[@]}" policy "$render" --rules "$rules"
done

# The README's live overlay (deploy/ by a relative path, the image set) renders with that image.
mkdir -p "$work/attn-live"
cat >"$work/attn-live/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to "$work/attn-live" deploy)
images:
  - name: attn-server
    newName: example-repository/attn-server
    newTag: "0123abc"
EOF
check "README's live overlay" sh -c "kubectl kustomize '$work/attn-live' \
  | grep -q 'image: example-repository/attn-server:0123abc' && echo 'renders deploy/ with the image set'"

check "dockerfile" "${checker[@]}" dockerfile Dockerfile --flags "$flagfile"

# The cohort's JupyterHub (deploy/jupyterhub, its images deploy/jupyterhub/hub/Dockerfile and
# client/python/Dockerfile) against deploy/'s render, with the participants' pods KubeSpawner
# makes from the deployed jupyterhub_config.py; then the README's overlay of it, which must pin
# every image by digest and replace every placeholder address range.
hub_render=$work/render/deploy_jupyterhub.yaml
check "jupyterhub deploy/jupyterhub" "${checker[@]}" jupyterhub "$hub_render" --server-render "$work/render/deploy.yaml" \
  --work "$work/hub-base"
hub_live=$work/attn-hub-live
mkdir -p "$hub_live"
cat >"$hub_live/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $(realpath --relative-to "$hub_live" deploy/jupyterhub)
images:
  - name: attn-hub
    newName: example-repository/attn-hub
    digest: sha256:$(printf '1%.0s' {1..64})
  - name: attn-notebook
    newName: example-repository/attn-notebook
    digest: sha256:$(printf '2%.0s' {1..64})
patches:
  - target: {kind: Service, name: attn-hub-public}
    patch: '[{"op": "replace", "path": "/spec/loadBalancerSourceRanges", "value": ["10.8.0.0/16"]},
             {"op": "add", "path": "/spec/loadBalancerIP", "value": "198.18.0.10"}]'
  - target: {kind: NetworkPolicy, name: attn-hub-public}
    patch: '[{"op": "replace", "path": "/spec/ingress/0/from/0/ipBlock/cidr", "value": "10.8.0.0/16"}]'
  - target: {kind: NetworkPolicy, name: attn-hub}
    patch: '[{"op": "replace", "path": "/spec/egress/1/to/0/ipBlock/cidr", "value": "172.16.0.2/32"}]'
EOF
kubectl kustomize "$hub_live" >"$work/hub-live.yaml" 2>"$work/hub-live.err" || cat "$work/hub-live.err" >"$work/hub-live.yaml"
check "README's hub overlay (images by digest, the workshop's ranges)" "${checker[@]}" jupyterhub "$work/hub-live.yaml" \
  --server-render "$work/render/deploy.yaml" --work "$work/hub-live-check" --require-filled

# The cohort's identity: the host's scripts (tokens, CA), run into a temporary folder, against the
# Deployment's mounts and flags; what they write validates as Kubernetes objects; and nothing
# they write (or any other token or key) is in what git would commit.
cohort_out=$work/cohort-scripts
mkdir -p "$cohort_out"
check "cohort scripts (mint-tokens.sh, make-cohort-ca.sh)" "${checker[@]}" cohort-scripts \
  --server-render "$work/render/deploy.yaml" --hub-render "$hub_render" --work "$cohort_out"
cat "$cohort_out"/tokens/*.yaml "$cohort_out"/tls/*.yaml 2>/dev/null | sed 's/^#.*//; /^---$/d; 1!s/^apiVersion:/---\napiVersion:/' >"$work/cohort-objects.yaml"
check "schema of the scripts' Secrets and ConfigMap" "${checker[@]}" k8s-schema "$work/cohort-objects.yaml" --kube-versions "$kube_versions"
check "no token or key material in the repository" "${checker[@]}" no-secrets

# --- Prometheus rules --------------------------------------------------------------------------
check "promtool check rules" "$promtool" check rules "$rules"
check "promtool test rules" "$promtool" test rules "$rule_tests"
check "rules policy" "${checker[@]}" rules-policy "$rules" --tests "$rule_tests"
check "rules objects in sync" "${checker[@]}" rules-sync

# --- Grafana and metric names ------------------------------------------------------------------
check "dashboard" "${checker[@]}" dashboard "$dashboard"
check "metric names" "${checker[@]}" metric-names --rules "$rules" --dashboard "$dashboard"
check "scrape check on sample_scrape.txt" "${checker[@]}" scrape tests/deploy/sample_scrape.txt --require-samples

# The real attn-server: probes, drain, and its /metrics against the dashboard and rules.
server_bin=${ATTN_SERVER_BIN:-build/server/attn-server}
real_scrape=$work/attn-server.metrics
live=0
# scrape_checks NAME FILE [--require-samples]: a scrape of attn-server holds the expected families,
# is clean under promtool, and has every metric, label and label value the dashboard and rules use.
scrape_checks() {
  check "$1: expected families" "${checker[@]}" scrape "$2" "${@:3}"
  check "$1: promtool check metrics" sh -c "'$promtool' check metrics <'$2' && echo clean"
  check "$1: dashboard and rules" "${checker[@]}" metric-names --rules "$rules" --dashboard "$dashboard" --scrape "$2"
}
if [ -x "$server_bin" ]; then
  check "attn-server as deployed ($server_bin)" "${scraper[@]}" "$server_bin" \
    --flagfile "$flagfile" --render "$work/render/deploy.yaml" --out "$real_scrape"
  if [ -s "$real_scrape" ]; then
    live=1
    scrape_checks "real scrape" "$real_scrape" --require-samples
  fi
  check "server flags" "${checker[@]}" server-flags "$flagfile" "$server_bin"
elif [ "${ATTN_DEPLOY_REQUIRE_SERVER:-0}" = 1 ]; then
  check "attn-server as deployed" sh -c "echo 'no attn-server binary at $server_bin (ATTN_SERVER_BIN)'; false"
else
  skip "attn-server as deployed" "no $server_bin (set ATTN_SERVER_BIN): no real scrape, probes or flags checked"
fi
if [ -n "${ATTN_METRICS_SCRAPE:-}" ]; then
  scrape_checks "scrape $ATTN_METRICS_SCRAPE" "$ATTN_METRICS_SCRAPE"
fi

# --- Terraform ---------------------------------------------------------------------------------
if command -v terraform >/dev/null 2>&1; then
  : >"$work/terraformrc"
  check "terraform fmt" env TF_CLI_CONFIG_FILE="$work/terraformrc" sh -c 'terraform fmt -check -diff -recursive terraform && echo formatted'
  # The validations themselves, run by terraform on variables.tf alone (no provider, so no
  # download and no cloud): the defaults with a project_id pass, a wrong gpu_count is refused.
  mkdir -p "$work/tf-vars" && cp terraform/variables.tf "$work/tf-vars/"
  tf_plan() {  # tf_plan VAR=VALUE...: terraform plan of variables.tf with these -var settings
    local vars=()
    for v in "$@"; do vars+=(-var "$v"); done
    (cd "$work/tf-vars" && export TF_CLI_CONFIG_FILE="$work/terraformrc" TF_IN_AUTOMATION=1 \
      && terraform init -input=false -no-color >/dev/null && terraform plan -input=false -no-color "${vars[@]}")
  }
  tf_defaults() { tf_plan project_id=attn-workshop-1 >/dev/null && echo "the defaults with a project_id pass every validation"; }
  check "terraform validations" tf_defaults
else
  skip "terraform fmt and validations" "terraform is not installed (no Debian package); the HCL parse below still runs"
fi
check "terraform hcl" "${checker[@]}" terraform terraform

# --- The broken copies must be rejected --------------------------------------------------------
reject "kustomization naming a missing file" "podmonitoring.yaml: no such file" \
  kubectl kustomize "$broken/kustomize-missing-resource"
reject "deployment without spec.selector" "'selector' is a required property" \
  render_and "$broken/deployment-missing-selector" k8s-schema --kube-versions "$kube_versions"
reject "pod that may run as root" "runAsNonRoot" render_and "$broken/pod-runs-as-root" policy
reject "gRPC open to every namespace" "admits every namespace" render_and "$broken/networkpolicy-any-namespace" policy
reject "ServiceMonitor with a typo" "'endpoints' is a required property" "${checker[@]}" k8s-schema "$broken/servicemonitor-typo.yaml"
reject "rule that does not parse" "parse error" "$promtool" check rules "$broken/bad-expression.rules.yaml"
reject "rule on an unknown metric" "attn_queue_length" "${checker[@]}" metric-names --rules "$broken/unknown-metric.rules.yaml"
reject "per-pod quantile" "keeps pod/instance" "${checker[@]}" rules-policy "$broken/per-pod-quantile.rules.yaml"
reject "dashboard on a misspelt metric" "attn_request_total" \
  "${checker[@]}" metric-names --dashboard "$broken/unknown-metric-dashboard.json"
reject "overlapping dashboard panels" "overlaps" "${checker[@]}" dashboard "$broken/overlapping-dashboard.json"
reject "scrape without attn_serving" "attn_serving: no" "${checker[@]}" scrape "$broken/scrape-missing-family.txt"
reject "terraform without gpu_count" "variable gpu_count is missing" "${checker[@]}" terraform "$broken/terraform-missing-variable"
reject "terraform syntax error" "HCL parse error" "${checker[@]}" terraform "$broken/terraform-syntax-error"

# Made from the real files, so they follow them.
mkdir -p "$work/weak" "$work/base-copy" "$work/tf-copy"
sed 's/(attn_queue_depth) >= 48/(attn_queue_depth) >= 60/' "$rules" >"$work/weak/attn.rules.yaml"
sed "s|^  - ../../deploy/monitoring/attn.rules.yaml|  - $work/weak/attn.rules.yaml|" "$rule_tests" >"$work/weak/test.yaml"
reject "alert threshold the unit tests disagree with" "FAILED" "$promtool" test rules "$work/weak/test.yaml"
sed 's/(attn_queue_depth) >= 48/(attn_queue_depth) >= 40/' deploy/components/gmp/rules.yaml >"$work/weak/gmp-rules.yaml"
reject "Rules object edited by hand" "differ from" "${checker[@]}" rules-sync "$work/weak/gmp-rules.yaml"
cp -r deploy/base/. "$work/base-copy/"
sed -i 's/^--queue_depth=64$/--queue_depth=32/' "$work/base-copy/attn-server.flags"
# 33 s = 5 + 25 + 3: no room for the 4 s attn-server may take to stop what is left and exit.
sed -i 's/terminationGracePeriodSeconds: 40/terminationGracePeriodSeconds: 33/' "$work/base-copy/deployment.yaml"
reject "alert above the queue depth" "can never fire" render_and "$work/base-copy" policy --rules "$rules"
reject "grace period without room for the drain's cancellation" "does not match preStop" render_and "$work/base-copy" policy --rules "$rules"
sed 's/^--devices=0$/--devices=/' deploy/base/attn-server.flags >"$work/base-copy/attn-server.flags"
sed -i 's/terminationGracePeriodSeconds: 33/terminationGracePeriodSeconds: 40/' "$work/base-copy/deployment.yaml"
reject "GPU pod that may fall back to the cpu backend" "must name its GPUs" render_and "$work/base-copy" policy
sed -i 's/^\(\s*\)- gke-gmp-system$/&\n\1- default/' "$work/base-copy/networkpolicy.yaml"
reject "metrics open to a namespace that is not monitoring" "metrics admitted from ['default']" \
  render_and "$work/base-copy" policy
sed 's/^\(\s*\)- attn-cohort$/&\n\1- default/' deploy/base/networkpolicy.yaml >"$work/base-copy/networkpolicy.yaml"
reject "gRPC open to namespaces outside the cohort" "admitted from namespaces ['default'], not only the cohort's" \
  render_and "$work/base-copy" policy
awk '/^---/ { k = "" } /^kind: / { k = $2 } k == "PrometheusRule" && /^    release: / { sub(/: .*/, ": prometheus") } { print }' \
  "$work/render/deploy_overlays_prometheus-operator.yaml" >"$work/weak/operator-release.yaml"
reject "PrometheusRule the operator's Prometheus would not pick up" "different release labels" \
  "${checker[@]}" policy "$work/weak/operator-release.yaml"
mkdir -p "$work/docker-copy"
cp .dockerignore "$work/docker-copy/"
sed '/^USER 10001:10001$/d' Dockerfile >"$work/docker-copy/Dockerfile"
reject "image that runs as root" "numeric non-root USER" "${checker[@]}" dockerfile "$work/docker-copy/Dockerfile"
cp Dockerfile "$work/docker-copy/Dockerfile"
sed '/^!bench\/attn_load\.cc$/d' .dockerignore >"$work/docker-copy/.dockerignore"
reject "build context without a source CMake builds" "names bench/attn_load.cc, which .dockerignore leaves out" \
  "${checker[@]}" dockerfile "$work/docker-copy/Dockerfile"
cp terraform/*.tf "$work/tf-copy/"
sed -i 's/^  default = "LATEST"$/  default = "DEFAULT"/' "$work/tf-copy/variables.tf"
reject "CUDA 13 image on the DEFAULT driver" "not LATEST" "${checker[@]}" terraform "$work/tf-copy" --dockerfile Dockerfile
awk '/^variable "cpu_machine_type"/ { v = 1 } v && /^  validation {$/ { skip = 1 } !skip { print } skip && /^  }$/ { skip = 0 } /^}$/ { v = 0 }' \
  terraform/variables.tf >"$work/tf-copy/variables.tf"
reject "terraform variable without a validation" "variable cpu_machine_type has no validation" \
  "${checker[@]}" terraform "$work/tf-copy"
if command -v terraform >/dev/null 2>&1; then
  sed -i 's/^  default = "LATEST"$/  default =   "LATEST"/' "$work/tf-copy/variables.tf"
  reject "terraform that is not formatted" "variables.tf" \
    env TF_CLI_CONFIG_FILE="$work/terraformrc" terraform fmt -check -recursive "$work/tf-copy"
  reject "gpu_count that machine_type does not carry" "gpu_count must match machine_type" \
    tf_plan project_id=attn-workshop-1 machine_type=g2-standard-24 gpu_count=1
  reject "zone outside region" "zone must be a zone of region" \
    tf_plan project_id=attn-workshop-1 region=europe-west4 zone=us-central1-a
fi

# The cohort's JupyterHub: each mistake against the check that must catch it.
mkdir -p "$work/hub"
hub_check() { "${checker[@]}" jupyterhub "$1" --server-render "$work/render/deploy.yaml" --work "$(mktemp -d -p "$work/hub")" "${@:2}"; }
hub_render_and() { kubectl kustomize "$1" >"$work/hub/render.yaml" && hub_check "$work/hub/render.yaml" "${@:2}"; }
sed 's|svc.cluster.local:50051$|svc.cluster.local:50052|' "$hub_render" >"$work/hub/wrong-port.yaml"
reject "notebook servers whose ATTN_TARGET is not a gRPC port" "is not a grpc port of Service" hub_check "$work/hub/wrong-port.yaml"
sed 's/^\(\s*\)\(name\|namespace\): attn-cohort$/\1\2: workshop/' "$hub_render" >"$work/hub/other-namespace.yaml"
reject "notebook servers in a namespace attn-server does not admit" "is not admitted to the gRPC port" \
  hub_check "$work/hub/other-namespace.yaml"
sed 's/^\(\s*\)c.KubeSpawner.automount_service_account_token = False$/\1c.KubeSpawner.automount_service_account_token = True/' \
  "$hub_render" >"$work/hub/sa-token.yaml"
reject "notebook pods with a service-account token" "automountServiceAccountToken must be false" hub_check "$work/hub/sa-token.yaml"
sed 's/^\(\s*\)"readOnlyRootFilesystem": True,$/\1"readOnlyRootFilesystem": False,/' "$hub_render" >"$work/hub/writable-root.yaml"
reject "notebook pods with a writable root" "readOnlyRootFilesystem must be true" hub_check "$work/hub/writable-root.yaml"
sed 's/"secretKeyRef": {"name": "attn-token-{username}"/"secretKeyRef": {"name": "attn-token-host"/' "$hub_render" >"$work/hub/shared-token.yaml"
reject "every notebook server given the host's token" "ATTN_TOKEN must come from Secret attn-token-alice" \
  hub_check "$work/hub/shared-token.yaml"
sed 's/^\(\s*\)c.KubeSpawner.mem_limit = .*/\1c.KubeSpawner.mem_limit = "8G"/' "$hub_render" >"$work/hub/too-big.yaml"
reject "notebook pods larger than the cohort's LimitRange allows" "above the LimitRange's max 4Gi" hub_check "$work/hub/too-big.yaml"
sed 's/^\(\s*\)persistentvolumeclaims: "27"$/\1persistentvolumeclaims: "11"/' "$hub_render" >"$work/hub/small-quota.yaml"
reject "a quota with room for 10 participants" "only 10 participants' pods fit its quota" hub_check "$work/hub/small-quota.yaml"
reject "notebook servers reachable from each other" "only the hub may reach them (never another participant's)" \
  hub_render_and "$broken/notebooks-reach-each-other"
reject "the hub open to every address" "0.0.0.0/0 admits every address" hub_render_and "$broken/hub-open-to-everyone"
reject "the hub's Role reading Secrets" "the hub may read Secrets" hub_render_and "$broken/hub-reads-secrets"
reject "the hub's base deployed as it is (placeholder ranges)" "is the repository's placeholder" hub_check "$hub_render" --require-filled
sed "s|example-repository/attn-notebook@sha256:2*|example-repository/attn-notebook:latest|" "$work/hub-live.yaml" >"$work/hub/by-tag.yaml"
reject "a notebook image by tag" "is not pinned by digest" hub_check "$work/hub/by-tag.yaml" --require-filled
sed 's/^USER 10001:10001$/USER root/' client/python/Dockerfile >"$work/hub/Dockerfile"
reject "a notebook image that runs as root" "numeric non-root USER" hub_check "$hub_render" --notebook-dockerfile "$work/hub/Dockerfile"
sed 's|^\(\s*\)cidr: 192.0.2.0/24$|\1cidr: 0.0.0.0/0|; s|^\(\s*\)- 192.0.2.0/24$|\1- 0.0.0.0/0|' \
  "$work/render/deploy_components_external.yaml" >"$work/weak/external-open.yaml"
reject "attn-server's external endpoint open to every address" "0.0.0.0/0 admits every address" \
  "${checker[@]}" policy "$work/weak/external-open.yaml"

# The cohort: identity, isolation, quotas (each against the check that must catch it).
reject "tokens Secret mounted writable" "must be mounted readOnly" render_and "$broken/secret-mounted-writable" policy
reject "tokens Secret mounted by subPath (never updated)" "subPath mount" render_and "$broken/secret-subpath" policy
reject "gRPC admitted by a label a namespace can set itself" "select the cohort by kubernetes.io/metadata.name alone" \
  render_and "$broken/networkpolicy-cohort-by-label" policy
reject "DNS egress to every address" "an egress rule to every destination" render_and "$broken/egress-anywhere" policy
reject "PriorityClass that the pod does not use" "no priorityClassName" render_and "$broken/no-priority-class" policy
reject "cohort egress to the internet" "egress to ipBlock 0.0.0.0/0" render_and "$broken/cohort-egress-anywhere" policy
sed 's|^\(\s*\)cidr: 192.0.2.0/24$|\1cidr: 10.0.0.0/8|' "$work/render/deploy_components_external.yaml" >"$work/weak/external-ranges.yaml"
reject "external gRPC admitted from addresses the load balancer does not take" "equal to an external LoadBalancer Service's loadBalancerSourceRanges" \
  "${checker[@]}" policy "$work/weak/external-ranges.yaml"
mkdir -p "$work/cohort-copy" "$work/id-copy"
cp -r deploy/cohort/. "$work/cohort-copy/"
sed -i 's/requests.nvidia.com\/gpu: "0"/requests.nvidia.com\/gpu: "1"/' "$work/cohort-copy/resourcequota.yaml"
reject "cohort quota that allows a GPU" "no ResourceQuota sets requests.nvidia.com/gpu: 0" render_and "$work/cohort-copy" policy
cp -r deploy/base/. "$work/id-copy/"
cp "$cohort_out/tokens/tokens.txt" "$work/id-copy/tokens.txt"
sed -i 's/^      - attn-server.flags$/&\n      - tokens.txt/' "$work/id-copy/kustomization.yaml"
sed -i 's|^--tokens_file=.*|--tokens_file=/etc/attn/flags/tokens.txt|' "$work/id-copy/attn-server.flags"
reject "tokens file in the flags ConfigMap" "holds a tokens-file line" render_and "$work/id-copy" policy
cp deploy/base/kustomization.yaml deploy/base/attn-server.flags "$work/id-copy/"
cp "$cohort_out/tokens/attn-server-tokens.secret.yaml" "$work/id-copy/"
sed -i 's/^  - priorityclass.yaml$/&\n  - attn-server-tokens.secret.yaml/' "$work/id-copy/kustomization.yaml"
reject "minted Secret added to the manifests" "a Secret with data in the repository's manifests" render_and "$work/id-copy" policy
cp deploy/base/kustomization.yaml "$work/id-copy/"
sed -i 's|^--tls_key_file=/etc/attn/tls/tls.key$|--tls_key_file=/etc/attn/tls.key|' "$work/id-copy/attn-server.flags"
reject "TLS key at a path no Secret is mounted on" "--tls_key_file=/etc/attn/tls.key: /etc/attn is not where a Secret volume is mounted" \
  render_and "$work/id-copy" policy
cp deploy/base/attn-server.flags "$work/id-copy/"
sed -i 's/^              port: 50052$/              port: 50051/' "$work/id-copy/deployment.yaml"
reject "probes on the TLS port (the kubelet cannot speak TLS)" "not the plaintext health port (--health_address) 50052" \
  render_and "$work/id-copy" policy
cp deploy/base/deployment.yaml "$work/id-copy/"
sed -i 's/^--workers_per_device=2$/--workers_per_device=1/' "$work/id-copy/attn-server.flags"
reject "one worker per device for a cohort" "one participant's task would hold the device's only worker" \
  render_and "$work/id-copy" policy
sed -i 's/^--workers_per_device=1$/--workers_per_device=4/; s/^--arena_mib=16384$/--arena_mib=2048/' "$work/id-copy/attn-server.flags"
reject "arena too small for its workers" "leaves 512 MiB each" render_and "$work/id-copy" policy
mkdir -p "$work/scripts-copy" "$work/leak"
sed 's/printf .%s. "\$t" | sha256sum/printf "%s\\n" "$t" | sha256sum/' scripts/mint-tokens.sh >"$work/scripts-copy/mint-newline.sh"
sed '/^umask 077$/d; /^chmod 600 /d' scripts/mint-tokens.sh >"$work/scripts-copy/mint-world-readable.sh"
sed 's/^for svc in attn-server attn-server-headless; do$/for svc in attn-server; do/' scripts/make-cohort-ca.sh >"$work/scripts-copy/ca-no-headless.sh"
chmod +x "$work"/scripts-copy/*.sh
mkdir -p "$work/sc1" "$work/sc2" "$work/sc3"
reject "mint-tokens.sh hashing the token with a newline" "is not the SHA-256 of the token handed out" \
  "${checker[@]}" cohort-scripts --mint "$work/scripts-copy/mint-newline.sh" --server-render "$work/render/deploy.yaml" --work "$work/sc1"
reject "mint-tokens.sh writing files others can read" "tokens.txt has mode 644, not 600" \
  "${checker[@]}" cohort-scripts --mint "$work/scripts-copy/mint-world-readable.sh" --server-render "$work/render/deploy.yaml" --work "$work/sc2"
reject "certificate without the headless Service's names" "lack ['DNS:attn-server-headless'" \
  "${checker[@]}" cohort-scripts --ca "$work/scripts-copy/ca-no-headless.sh" --server-render "$work/render/deploy.yaml" --work "$work/sc3"
cp -r deploy "$work/leak/"
cp "$cohort_out/tokens/handout.txt" "$work/leak/deploy/participants.txt"
reject "handed-out tokens left in the tree" "holds a bearer token" "${checker[@]}" no-secrets "$work/leak"
rm "$work/leak/deploy/participants.txt"
cp "$cohort_out/tls/tls.key" "$work/leak/deploy/server.pem"
reject "a private key left in the tree" "holds a private key" "${checker[@]}" no-secrets "$work/leak"

reject "scrape that promtool check metrics rejects" 'should have "_total" suffix' \
  sh -c "'$promtool' check metrics <'$broken/unclean-scrape.txt'"

# Against the real attn-server: what only a running server can show.
if [ "$live" = 1 ]; then
  reject "flag file with a flag attn-server lacks" "--queue_size is not a flag" \
    "${checker[@]}" server-flags "$broken/unknown-flag.flags" "$server_bin"
  # Listed in a copy of expected_metrics.txt, so only the real scrape can tell.
  sed 's/attn_arena_used_bytes/attn_arena_in_use_bytes/g' "$dashboard" >"$work/weak/dashboard.json"
  { cat tests/deploy/expected_metrics.txt; echo "attn_arena_in_use_bytes gauge"; } >"$work/weak/expected.txt"
  reject "dashboard on a metric attn-server does not export" "attn_arena_in_use_bytes is not in the real scrape" \
    "${checker[@]}" metric-names --expected "$work/weak/expected.txt" --dashboard "$work/weak/dashboard.json" \
    --scrape "$real_scrape"
  sed 's/by (backend, dtype)/by (backend, type)/' "$dashboard" >"$work/weak/dashboard-label.json"
  reject "dashboard aggregating by a label attn-server lacks" "aggregates by label type" \
    "${checker[@]}" metric-names --dashboard "$work/weak/dashboard-label.json" --scrape "$real_scrape"
  sed 's/rpc="Attend"/rpc="attend"/' "$rules" >"$work/weak/label-value.rules.yaml"
  reject "alert on a label value attn-server never sets" 'rpc is never "attend"' \
    "${checker[@]}" metric-names --rules "$work/weak/label-value.rules.yaml" --scrape "$real_scrape"
  sed 's/service: attention.v1.AttentionService$/service: attention.v1.Attention/' "$work/render/deploy.yaml" \
    >"$work/weak/render-probe.yaml"
  reject "readiness probe on a health service attn-server lacks" "readinessProbe asks health service 'attention.v1.Attention'" \
    "${scraper[@]}" "$server_bin" --flagfile "$flagfile" --render "$work/weak/render-probe.yaml" --out "$work/weak/scrape"
else
  skip "broken cases against the real attn-server" "no attn-server binary, or it did not start"
fi

echo "deploy-check: $((SECONDS - started)) s"
echo "deploy-check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
