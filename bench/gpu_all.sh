#!/usr/bin/env bash
# One device call after a change touching the runner and the server: every engine test, the
# runner's suite with the peers' JAX cells beside it, then bench/gpu_server.sh.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
source "$(dirname "$0")/gpu_tests.sh"
grep -E 'runner medians' "$out/tests.log"
t0=$(date +%s%N)
.gpu/run attn-bench --suite=codelab --check_numerics > "$out/codelab.txt" 2> /dev/null
echo "codelab suite wall time: $(( ($(date +%s%N) - t0) / 1000000 )) ms"
grep -A3 '== correctness' "$out/codelab.txt"
python3 .gpu/peers.py --shape 4,128,128,8,8,64,0 --impl torch_cudnn,torch_flash 2>&1 | tail -4
bash "$(dirname "$0")/gpu_server.sh"
