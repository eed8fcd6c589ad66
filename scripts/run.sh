#!/usr/bin/env bash
# The main job: starts attn-server on the local GPU (the cpu backend where there is none), then
# runs attn-client against it: health, one checked Attend at the codelab's default shape, and
# the codelab suite (`bench --suite codelab --check`), which prints the codelab's tables and
# writes results.csv, results.json and report.html to $ATTN_REPORT_DIR (default
# <build>/codelab-report). Without a GPU the suite's tables are measured on the cpu backend
# (about 40 s on 2 cores; the per-case time budget cuts repeats of slow cases and the tables
# mark them). Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh

archs=${ATTN_CUDA_ARCHITECTURES:-}
if [ -z "$archs" ] && command -v nvidia-smi >/dev/null 2>&1; then
  archs=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '.') || true
  # H100/H200: the arch-specific target, which holds the fused backend's wgmma kernel.
  if [ "$archs" = 90 ]; then archs=90a; fi
fi
build=${ATTN_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF \
  ${archs:+-DCMAKE_CUDA_ARCHITECTURES=$archs} >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
cmake --build "$build" -j"$(nproc)" --target attn-server attn-client

port=${ATTN_PORT:-50051}
"$build/server/attn-server" --listen_address=127.0.0.1:$port --metrics_address= --arena_mib=1024 \
  >"$build.server.log" 2>&1 &
server=$!
trap 'kill -TERM $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 1 100); do grep -qE 'SERVING|cannot start' "$build.server.log" && break; sleep 0.1; done
grep -E 'SERVING|cannot start|cpu backend' "$build.server.log" || { cat "$build.server.log"; exit 1; }
client=("$build/client/attn-client" --target=127.0.0.1:$port)
echo "== attn-client health"
"${client[@]}" health
echo "== attn-client attend --check: one call at the codelab's default shape, checked here"
"${client[@]}" attend --batch=4 --seq-len=128 --heads=8 --head-dim=64 --dtype=bfloat16 --check
report=${ATTN_REPORT_DIR:-$build/codelab-report}
echo "== attn-client bench --suite codelab --check --out $report"
"${client[@]}" bench --suite codelab --check --out "$report"
