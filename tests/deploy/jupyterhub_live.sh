#!/usr/bin/env bash
# The cohort's JupyterHub live on loopback (tests/deploy/jupyterhub_live.py): a fresh venv with
# the hub image's packages (deploy/jupyterhub/hub/requirements.txt) and the notebook image's
# (attn_client with the notebook extras at client/python/constraints.txt, JupyterLab), then the
# deployed hub config with a local spawner against this attn-server. Needs configurable-http-proxy
# (Debian package node-configurable-http-proxy, in scripts/apt-packages-test.txt).
#
#   tests/deploy/jupyterhub_live.sh ATTN_SERVER [BUILD_DIR]
#
# The venv is BUILD_DIR/hub-venv (default build-test/); exits with the test's status.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
server=${1:-}
[ -x "$server" ] || { echo "tests/deploy/jupyterhub_live.sh: no attn-server binary at '$server'" >&2; exit 2; }
server=$(realpath "$server")
build=$(realpath "${2:-$root/build-test}")
venv=$build/hub-venv
command -v configurable-http-proxy >/dev/null \
  || { echo "tests/deploy/jupyterhub_live.sh: configurable-http-proxy missing (Debian package node-configurable-http-proxy)" >&2; exit 2; }

rm -rf "$venv"
python3 -m venv "$venv"
# JupyterLab at the notebook image's version (client/python/Dockerfile).
jupyterlab=$(grep -o 'jupyterlab==[0-9.]*' "$root/client/python/Dockerfile")
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/deploy/jupyterhub/hub/requirements.txt" \
  -c "$root/client/python/constraints.txt" "$root/client/python[notebook]" "$jupyterlab" \
  -r "$root/client/python/requirements-test.txt"
# Debian's configurable-http-proxy finds its modules in /usr/share/nodejs, which a nodejs from
# elsewhere (NodeSource's, on some machines) does not search by itself.
NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH} PATH="$venv/bin:$PATH" exec "$venv/bin/python" "$root/tests/deploy/jupyterhub_live.py" "$server" "${@:3}"
