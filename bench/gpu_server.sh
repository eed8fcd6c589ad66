#!/usr/bin/env bash
# One device call for attn-server (issue 5): the server tests, then a GPU server with attn-load
# over loopback: Attend at the codelab's default shape (1 client; uploaded and server-generated
# inputs) and payload throughput with 8 concurrent clients at (4, 1024, 8, 64) bf16.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
echo "== server tests"
ATTN_SERVER_BINARY=$PWD/.gpu/bin/attn-server timeout 200 .gpu/run attn_server_tests --gtest_brief=1 > "$out/server-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/server-tests.log"
echo "== attn-server on the GPU"
.gpu/run attn-server --listen_address=127.0.0.1:50051 --metrics_address=127.0.0.1:9464 > "$out/server.log" 2>&1 &
for i in $(seq 1 100); do grep -q 'SERVING' "$out/server.log" && break; sleep 0.2; done
grep -E 'SERVING|warn|error' "$out/server.log" | head -5
.gpu/run attn-load --shape=4,128,8,64 --dtype=bfloat16 --calls=2000 --upload=false --omit_output
.gpu/run attn-load --shape=4,128,8,64 --dtype=bfloat16 --calls=2000 --upload=false
.gpu/run attn-load --shape=4,128,8,64 --dtype=bfloat16 --calls=2000
.gpu/run attn-load --shape=4,1024,8,64 --dtype=bfloat16 --clients=8 --calls=200
.gpu/run attn-load --shape=4,1024,8,64 --dtype=bfloat16 --clients=1 --calls=200
curl -s 127.0.0.1:9464/metrics > "$out/metrics.txt" || true
grep -E '^attn_(requests_total|device_info|serving)' "$out/metrics.txt"
kill -TERM %1; wait %1; echo "server exit $?"
tail -3 "$out/server.log"
