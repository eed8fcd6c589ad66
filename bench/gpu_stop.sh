#!/usr/bin/env bash
# One device call for issue 19 on the GPU: every engine test (the pieces and stops of fused,
# cudnn, cudnn_fp8 and naive among them), the server tests (the GPU admission, stop and drain
# tests among them), then the judged shapes through attn-server, the landed commit's server
# (.gpu/bin/attn-server-base) and this one's interleaved over two rounds, same client, same call.
#
# Here:  ../shared/gpu/bundle .gpu build/tests/attn_engine_tests build/tests/attn_server_tests \
#          build/server/attn-server build/client/attn-client build/engine/attn-bench \
#          build/bench/attn-load /tmp/base/attn-server-base
# Device call: carry [".gpu"], command `bash bench/gpu_stop.sh`. The timings come first, the tests
# last (ENGINE_TIMEOUT, default 300 s, bounds the engine tests to fit one 10-minute command).
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader

echo "== judged shapes through attn-server: landed (base) vs this commit, interleaved"
bench() {  # $1 server binary, $2 label
  .gpu/run "$1" --listen_address=127.0.0.1:50051 --metrics_address= --arena_mib=16384 >"$out/server-$2.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 300); do grep -qs 'SERVING' "$out/server-$2.log" && break; sleep 0.2; done
  for args in "--backends=fused,cudnn --batch-sizes=4 --heads=16 --head-dims=128 --seq-lens=4096,8192 --causal=both" \
              "--backends=cudnn_fp8 --batch-sizes=4 --heads=16 --head-dims=128 --seq-lens=8192 --causal=true" \
              "--backends=fused,cudnn --batch-sizes=4 --heads=8 --head-dims=64 --seq-lens=128,512,2048 --causal=true"; do
    .gpu/run attn-client --target=127.0.0.1:50051 --format=csv bench $args --dtypes=bfloat16 \
      --warmup=10 --repeats=50 --progress=none 2>>"$out/client-$2.err" | tail -n +2
  done >"$out/bench-$2.csv"
  kill -TERM "$pid"; wait "$pid"
}
for round in 1 2; do
  bench attn-server-base "base$round"
  bench attn-server "new$round"
done
python3 - "$out" <<'PY'
import csv, sys
out = sys.argv[1]
def load(name):
    rows = {}
    for r in csv.reader(open(f"{out}/bench-{name}.csv")):
        if len(r) > 16 and r[12] == "OK":
            rows[(r[3], r[5], r[6], r[8], r[10], r[11])] = float(r[16])
    return rows
runs = {n: load(n) for n in ("base1", "new1", "base2", "new2")}
print(f"{'backend':10} {'B':>2} {'T':>5} {'N':>3} {'H':>4} {'causal':6} {'base1':>8} {'new1':>8} {'base2':>8} {'new2':>8} {'new/base':>8}")
ratios = []
for key in runs["base1"]:
    v = [runs[n].get(key, float("nan")) for n in ("base1", "new1", "base2", "new2")]
    r = (v[1] + v[3]) / (v[0] + v[2])
    ratios.append(r)
    print(f"{key[0]:10} {key[1]:>2} {key[2]:>5} {key[3]:>3} {key[4]:>4} {key[5]:6} " + " ".join(f"{x:8.4f}" for x in v) + f" {r:8.3f}")
if ratios:
    print(f"new/base median-time ratio over {len(ratios)} shapes: min {min(ratios):.3f}, max {max(ratios):.3f}")
PY

echo "== server tests"
ATTN_SERVER_BINARY=$PWD/.gpu/bin/attn-server ATTN_BENCH_BINARY=$PWD/.gpu/bin/attn-bench \
  ATTN_LOAD_BINARY=$PWD/.gpu/bin/attn-load ATTN_SOURCE_DIR=$PWD timeout 150 .gpu/run attn_server_tests >"$out/server-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|SKIPPED|FAILED) |the next call was answered|drain on the GPU' "$out/server-tests.log" | grep -v '^\[20'
echo "== engine tests"
timeout "${ENGINE_TIMEOUT:-300}" .gpu/run attn_engine_tests --gtest_brief=1 >"$out/engine-tests.log" 2>&1
echo "exit $?"; grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/engine-tests.log" | sort | uniq -c | sort -rn | head -20
grep -E 'asked to stop' "$out/engine-tests.log"
