#!/usr/bin/env bash
# The main job: starts attn-server on the local GPU (the cpu backend where there is none) and
# makes a smoke call against it (attn-load: Attend latency over loopback), then runs the
# codelab suite through the engine's runner (attn-bench --suite=codelab; about a minute on 2
# cores, the per-case time budget cuts repeats of slow cases and the table marks them). Until
# attn-client lands (issue 6) the suite runs in-process rather than through the server.
# Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

archs=${ATTN_CUDA_ARCHITECTURES:-}
if [ -z "$archs" ] && command -v nvidia-smi >/dev/null 2>&1; then
  archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.') || true
fi
build=${ATTN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF \
  ${archs:+-DCMAKE_CUDA_ARCHITECTURES=$archs} >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target attn-bench attn-server attn-load

port=${ATTN_PORT:-50051}
"$build/server/attn-server" --listen_address=127.0.0.1:$port --metrics_address= --arena_mib=1024 \
  >"$build.server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 100); do grep -qE 'SERVING|cannot start' "$build.server.log" && break; sleep 0.1; done
grep -E 'SERVING|cannot start|cpu backend' "$build.server.log" || { cat "$build.server.log"; exit 1; }
echo "== smoke call: Attend at the codelab's default shape over loopback"
"$build/server/attn-load" --target=127.0.0.1:$port --shape=4,128,8,64 --dtype=bfloat16 --calls=50

bench="$build/engine/attn-bench"
if "$bench" --device=0 --list >/dev/null 2>&1; then
  "$bench" --device=0 --suite=codelab --check_numerics
else
  echo "no usable GPU here: the codelab's tables on the cpu backend (float64 reference)"
  "$bench" --device=-1 --suite=codelab --check_numerics
fi
