#!/usr/bin/env bash
# One device call for the benchmark runner (issue 4): all GPU tests; the codelab suite cold in
# one process (wall time, plan builds included); graph replay at the codelab's default shape;
# the large suite with numerics checked; the JAX notebook's cells for the wall-time comparison.
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
echo "== runner vs a plain loop (from the test, same process, same inputs)"
grep -E 'runner medians' "$out/tests.log"
echo "== large suite with numerics (naive float32 reference on the GPU beyond 4 GFLOP)"
.gpu/run attn-bench --suite=large --check_numerics > "$out/large.txt" 2> /dev/null
grep -vE 'skipped: (fused|cudnn_fp8)' "$out/large.txt"
echo "== the JAX notebook's equivalent cells (jit per shape), cold"
PYTHONUNBUFFERED=1 timeout 240 python3 bench/jax_codelab.py 2>&1 | grep -vE 'Warning|warn' | tail -25
