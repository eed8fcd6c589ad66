#!/usr/bin/env bash
# The main job. Until attn-server lands (issue 5) this runs the engine demo: attn-bench over the
# codelab's shapes on the local GPU with the naive backend, or on the CPU backend where there is
# no GPU. Installs what is missing first.
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
  echo "== GPU: the codelab's naive cell, float32 and bfloat16, sequence sweep (B=4, N=8, H=64)"
  "$bench" --backend=naive --dtypes=float32,bfloat16 --batch=4 --seq_lens=64,128,256,512,1024 \
    --heads=8 --head_dim=64
  echo "== GPU: causal"
  "$bench" --backend=naive --dtypes=bfloat16 --causal --batch=4 --seq_lens=128,256,512,1024,2048 \
    --heads=8 --head_dim=64
else
  echo "== no GPU here: the cpu backend (float64 reference) at the codelab's default shape"
  "$bench" --device=-1 --backend=cpu --dtypes=float32 --batch=4 --seq_lens=64,128,256 \
    --heads=8 --head_dim=64 --warmup=1 --repeats=5
fi
