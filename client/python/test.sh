#!/usr/bin/env bash
# attn_client's tests against a real attn-server (the cpu backend on loopback): a fresh venv,
# the package installed from this folder as a participant installs it (its gRPC stubs generated
# from proto/ while it builds), the pinned test tools, then pytest, the codelab notebook's
# headless run included.
#
#   client/python/test.sh ATTN_SERVER [BUILD_DIR]
#
# ATTN_SERVER: the attn-server binary (or $ATTN_SERVER_BINARY). The venv is BUILD_DIR/python-venv
# (default build-test/); the executed notebook is left at BUILD_DIR/codelab-executed.ipynb.
# Exits with pytest's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
server=${1:-${ATTN_SERVER_BINARY:-}}
[ -x "$server" ] || { echo "client/python/test.sh: no attn-server binary at '$server'" >&2; exit 2; }
server=$(realpath "$server")
build=$(realpath "${2:-$here/../../build-test}")
venv=$build/python-venv

rm -rf "$venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$here/constraints.txt" \
  "$here[notebook]" -r "$here/requirements-test.txt"
cd "$here"
ATTN_SERVER_BINARY=$server ATTN_NOTEBOOK_OUT=$build/codelab-executed.ipynb \
  "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider tests
