#!/usr/bin/env bash
# One device call for the benchmark runner (issue 4): all GPU tests; the codelab suite cold in
# one process (wall time, plan builds included); graph replay at the codelab's default shape;
# and the runner against a plain attn-bench loop on a large cudnn case, interleaved three times.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
source "$(dirname "$0")/gpu_tests.sh"
echo "== codelab suite, cold process"
t0=$(date +%s%N)
.gpu/run attn-bench --suite=codelab --check_numerics > "$out/codelab.txt" 2> /dev/null
t1=$(date +%s%N)
echo "codelab suite wall time: $(( (t1 - t0) / 1000000 )) ms"
grep -vE 'skipped: (fused|cudnn_fp8)' "$out/codelab.txt"
echo "== codelab suite as JSON, graph replay"
.gpu/run attn-bench --suite=codelab --graph --format=json > "$out/codelab-graph.json" 2> /dev/null
grep -E '"T": 128, "S": 128, "N": 8, "K": 8, "H": 64, "dtype": "bfloat16", "causal": (false|true), "status": "ok"' "$out/codelab-graph.json" | grep -oE '"section": "[^"]*"|"backend": "[^"]*"|"causal": [a-z]*|"median_ms": [0-9.e-]*|"timing": "[^"]*"' | paste - - - - -
echo "== runner vs plain loop, B4 T8192 N16 H128 causal bf16, three rounds"
for round in 1 2 3; do
  .gpu/run attn-bench --suite=large --format=csv 2>/dev/null | grep '"large causal","cudnn","cudnn",4,8192' | cut -d, -f13 | sed "s/^/round $round runner median ms: /"
  .gpu/run attn-bench --backend=cudnn --dtypes=bfloat16 --batch=4 --heads=16 --head_dim=128 --seq_lens=8192 --causal --warmup=10 --repeats=50 | grep '^cudnn' | awk -v r=$round '{print "round " r " plain  median ms: " $(NF-6)}'
done
echo "== the JAX notebook's equivalent cells (jit per shape), cold"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/jax_codelab.py 2>&1 | grep -vE 'Warning|warn' | tail -25
