#!/usr/bin/env bash
# One device call for the serving path: the card's state and every engine test, the server's GPU
# tests and the abuse test on the GPU, then the judged shapes through attn-server beside the
# landed server's (gpu_steps.sh's gpu_server_ab). The bundle in .gpu holds attn_engine_tests,
# attn_server_tests, attn_abuse_tests, attn-server, attn-load, attn-bench, and the landed commit's
# attn-server renamed attn-server-base (../shared/gpu/README.md shows how to make it).
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
source "$(dirname "$0")/gpu_tests.sh"
source "$(dirname "$0")/gpu_steps.sh"
bin=$PWD/.gpu/bin
export ATTN_SERVER_BINARY=$bin/attn-server ATTN_BENCH_BINARY=$bin/attn-bench \
  ATTN_LOAD_BINARY=$bin/attn-load
echo "== server tests on the GPU"
timeout 300 .gpu/run attn_server_tests --gtest_filter='*Gpu*' --gtest_brief=1 \
  > "$out/server-tests.log" 2>&1
echo "exit $?"
grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/server-tests.log"
grep -B2 -A8 'Failure' "$out/server-tests.log" | head -40
echo "== the abuse test on the GPU"
timeout 300 .gpu/run attn_abuse_tests > "$out/abuse.log" 2>&1
echo "exit $?"
grep -vE '^\[ (RUN|  OK) ' "$out/abuse.log" | tail -20
echo "== the judged shapes through attn-server, ours and the landed one"
gpu_server_ab attn-server attn-server-base
