#!/usr/bin/env bash
# attn's cpu backend beside JAX's XLA CPU attention on this machine's cores (bench/cpu_peers.py).
# Not part of CI: makes a venv with jax[cpu] (pinned) in <build>/jax-venv, builds attn-bench
# without CUDA in <build> (default build-cpu), and holds the build lock while timing, so no build
# shares the cores.
#   bench/cpu_peers.sh [--rounds=3] [--filter='T1024'] ...   (arguments go to cpu_peers.py)
set -euo pipefail
cd "$(dirname "$0")/.."
JAX_VERSION=0.10.2
build=${ATTN_BUILD_DIR:-build-cpu}
lock=${ATTN_BUILD_LOCK:-/tmp/attn-build.lock}

venv=$build/jax-venv
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import jax; assert jax.__version__ == '$JAX_VERSION'" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "jax[cpu]==$JAX_VERSION"
fi
flock "$lock" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_ENABLE_CUDA=OFF \
  >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
flock "$lock" cmake --build "$build" --target attn-bench
exec flock "$lock" "$venv/bin/python" bench/cpu_peers.py --attn_bench="$build/engine/attn-bench" "$@"
