#!/usr/bin/env bash
# One device call's worth of checks on the GPU machine (see ../shared/gpu/README.md): the GPU
# tests, then attn-bench beside the peers in the same call. Expects the bundle in .gpu (made here with
# ../shared/gpu/bundle) and writes full logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
# At most 8 files come back from $OUT: summary (the caller's tee), tests, bench, peers,
# memcheck, racecheck, ncu.
source "$(dirname "$0")/gpu_tests.sh"
source "$(dirname "$0")/gpu_steps.sh"

echo "== naive backend, B=4 T=1024 N=8 H=64 (issue 2), then the codelab sequence sweep"
bench() { .gpu/run attn-bench --backend=naive --warmup=20 --repeats=100 "$@"; }
{
  bench --dtypes=float32,bfloat16 --batch=4 --seq_lens=1024 --heads=8 --head_dim=64
  bench --dtypes=float32,bfloat16 --batch=4 --seq_lens=1024 --heads=8 --head_dim=64 --causal
  bench --dtypes=float32,bfloat16 --batch=4 --seq_lens=64,128,256,512,1024 --heads=8 --head_dim=64
} 2>&1 | tee "$out/bench.log"
echo "== peers in the same call"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/naive_peers.py --shape 4,1024,8,64 2>&1 | grep -v Warning | tee "$out/peers.log"
PYTHONUNBUFFERED=1 timeout 120 python3 bench/naive_peers.py --shape 4,1024,8,64 --causal 2>&1 | grep -v Warning | tee -a "$out/peers.log"
echo "== ours again (interleaved with the peers for drift)"
bench --dtypes=float32,bfloat16 --batch=4 --seq_lens=1024 --heads=8 --head_dim=64 2>&1 | tee -a "$out/bench.log"
echo "== compute-sanitizer memcheck and racecheck on the small naive tests"
gpu_sanitize 'NaiveBackend.*:*NaiveVersusReference*B2_T17_S17*' 150 memcheck racecheck
echo "== per-kernel device time of one naive call (ncu), B=4 T=1024 N=8 H=64"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for dt in float32 bfloat16; do
  timeout 120 .gpu/run "$ncu" --clock-control none --metrics gpu__time_duration.sum,dram__bytes.sum \
    attn-bench --backend=naive --dtypes=$dt --batch=4 --seq_lens=1024 --heads=8 --head_dim=64 \
    --warmup=0 --repeats=1 > "$out/ncu.tmp" 2>&1
  echo "-- $dt (ncu exit $?)"
  cat "$out/ncu.tmp" >> "$out/ncu.log"
  grep -E '^  [A-Za-z_].*\(|gpu__time_duration.sum|dram__bytes.sum' "$out/ncu.tmp" | head -24
done
rm -f "$out/ncu.tmp"
