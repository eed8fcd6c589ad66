#!/usr/bin/env bash
# The main job. Until attn-server lands (issue 5) this runs the codelab suite in the engine
# (attn-bench --suite=codelab) on the local GPU, or on the cpu backend where there is no GPU
# (about a minute on 2 cores; the per-case time budget cuts repeats of the slow cases and the
# table marks them). Installs what is missing first.
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
cmake --build "$build" -j"$(nproc)" --target attn-bench

bench="$build/engine/attn-bench"
if "$bench" --device=0 --list >/dev/null 2>&1; then
  "$bench" --device=0 --suite=codelab --check_numerics
else
  echo "no usable GPU here: the codelab's tables on the cpu backend (float64 reference)"
  "$bench" --device=-1 --suite=codelab --check_numerics
fi
