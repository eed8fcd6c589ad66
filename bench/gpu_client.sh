#!/usr/bin/env bash
# One device call for attn-client (issue 6): the client and server tests, then attn-server on the
# GPU driven by attn-client as the cohort drives it: info, health, checked Attends, the codelab
# suite with --out (results.csv, results.json, report.html under $OUT/codelab-report), and a
# sweep spread over two servers on the same GPU with round_robin. PyTorch SDPA at the default
# shape, in the same call, for scale. Bundle: $BUNDLE (default .gpu-client) with attn-server,
# attn-client, attn_client_tests and attn_server_tests.
set -uo pipefail
b=${BUNDLE:-.gpu-client}
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
export ATTN_SERVER_BINARY=$PWD/$b/bin/attn-server ATTN_CLIENT_BINARY=$PWD/$b/bin/attn-client \
  ATTN_CLIENT_GOLDEN_DIR=$PWD/tests/client/golden
for t in attn_client_tests attn_server_tests; do
  echo "== $t"
  timeout 200 "$b/run" "$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "exit $?"; grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/$t.log"; grep -A2 ': Skipped$' "$out/$t.log" | head -6
done

echo "== attn-server on the GPU (two: 50051 and 50052, for the round_robin run)"
"$b/run" attn-server --listen_address=127.0.0.1:50051 --metrics_address= > "$out/server-a.log" 2>&1 &
"$b/run" attn-server --listen_address=127.0.0.1:50052 --metrics_address= --arena_mib=2048 > "$out/server-b.log" 2>&1 &
for _ in $(seq 1 150); do grep -q 'SERVING' "$out/server-a.log" && grep -q 'SERVING' "$out/server-b.log" && break; sleep 0.2; done
grep -hE 'SERVING|warn|error' "$out/server-a.log" "$out/server-b.log" | head -6
client=("$b/run" attn-client --target=127.0.0.1:50051)
"${client[@]}" info
"${client[@]}" health
echo "== attend --check"
"${client[@]}" attend --check
"${client[@]}" attend --seq-len=1024 --causal --heads=8 --kv-heads=2 --check
"${client[@]}" attend --dtype=float32 --backend=naive --check
echo "== bench --suite codelab --check --out $out/codelab-report"
t0=$(date +%s%N)
"${client[@]}" bench --suite codelab --check --out "$out/codelab-report" 2> "$out/codelab-progress.log"
echo "exit $?; wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
echo "== round_robin over both servers: causal sweep, cudnn bf16"
"$b/run" attn-client --target=127.0.0.1:50051,127.0.0.1:50052 bench --seq-lens=256,512,1024,2048,4096,8192 \
  --heads=16 --head-dims=128 --backends=cudnn --causal=true --out "$out/rr-report" 2> /dev/null
echo "exit $?"
echo "== bench --suite large --budget 1"
"${client[@]}" bench --suite large --budget 1 --out "$out/large-report" 2> /dev/null | tail -40
kill -TERM %1 %2; wait
echo "== peers at the codelab's default shape (PyTorch SDPA)"
python3 "$b/peers.py" --shape 4,128,128,8,8,64,0 --impl torch_cudnn,torch_flash 2>&1 | tail -4
