#!/usr/bin/env bash
# One device call for issue 25: attn-server on the GPU driven at the codelab's default shape
# (B4 T128 N8 H64 bf16, inputs uploaded, the output returned) at concurrency 1, 8 and 32 by
# attn-load (attention.v1 Attend, one channel per client) and by perf_analyzer (the Open Inference
# Protocol's ModelInfer on model `attention`, bench/perf_analyzer.sh), then attn's own histograms
# of both RPCs from /metrics. The server's participant quotas are raised so that one load
# generator may hold 32 calls whatever the client key: perf_analyzer's threads share a few
# connections, and attn's fair queue keys calls by connection without tokens.
#
#   bash bench/gpu_perf_analyzer.sh        with carry [".gpu", ".whl-pa"]; ~2-3 minutes, at most ~7
#
# Every step has a time limit (server start 30 s, attn-load 45 s a level, perf_analyzer 60 s a
# level), so the call ends within about 7 minutes whatever happens.
#
# .gpu: ../shared/gpu/bundle .gpu build/server/attn-server build/bench/attn-load
# .whl-pa: bench/perf_analyzer_wheels.sh (perf_analyzer's wheel runs on that machine's glibc 2.39).
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv
# perf_analyzer is one binary in its wheel: unpacked with zipfile, so no pip or venv is needed there.
python3 -c 'import glob, sys, zipfile; zipfile.ZipFile(glob.glob(sys.argv[1] + "/perf_analyzer-*.whl")[0]).extractall("/tmp/pa")' "${WHEELS:-.whl-pa}"
chmod +x /tmp/pa/perf_analyzer/bin/perf_analyzer
echo "== attn-server on the GPU"
.gpu/run attn-server --listen_address=127.0.0.1:50051 --metrics_address=127.0.0.1:9464 \
  --participant_max_inflight=64 --participant_max_queued=64 --participant_device_seconds=3600 \
  > "$out/server.log" 2>&1 &
for _ in $(seq 1 150); do grep -q 'SERVING' "$out/server.log" && break; sleep 0.2; done
grep -E 'SERVING|warn|error' "$out/server.log" | head -5
echo "== attn-load: Attend, B4 T128 N8 H64 bf16"
for c in 1 8 32; do
  echo "-- clients $c"
  timeout -k 5 45 .gpu/run attn-load --shape=4,128,8,64 --dtype=bfloat16 --clients=$c --calls=$((4000 / c + 500))
done
# perf_analyzer: each level sends exactly 3000 requests and measures them as one window
# (bench/perf_analyzer.sh --requests). Its stabilising time or count windows are what grew to
# ~130 GB at concurrency 8 and 32 (2026-12-04): perf_analyzer keeps a copy of every request's 2 MiB
# of tensors until its one main thread summarises the window, and at ~1300 calls/s that thread
# falls behind, so each window outgrows the last. With a fixed count its memory is bounded by about
# 2 x 3000 x 2 MiB = 12 GB (measured on the cpu backend: 3.6-4.0 GB for 1000 requests at 1, 8, 32).
# Guards so that nothing here can take the machine down or hang: per level 60 s and 24 GiB
# resident (the script kills perf_analyzer past either), and a 40 GiB address-space limit on
# perf_analyzer's shell as a backstop (an allocation past it fails in perf_analyzer, not the OOM
# killer).
echo "== perf_analyzer: ModelInfer on attention, same shape, 3000 requests a level"
(ulimit -v $((40 * 1024 * 1024))
 ATTN_PERF_ANALYZER=/tmp/pa/perf_analyzer/bin/perf_analyzer exec bash bench/perf_analyzer.sh \
   --target=127.0.0.1:50051 --concurrency=1,8,32 --requests=3000 --max_rss_mib=24576 --timeout_s=60 \
   --out="$out/perf_analyzer.csv") > "$out/perf_analyzer.log" 2>&1
echo "exit $?"
grep -E '^(== perf_analyzer|Request concurrency|  Client:|    (Request count|Throughput|Avg latency|p50|p99|Avg gRPC)|perf_analyzer: peak RSS|bench/perf_analyzer.sh)' "$out/perf_analyzer.log"
tr , "\t" < "$out/perf_analyzer.csv"
echo "== attn's histograms (server side): requests by rpc, queue wait, device time"
curl -s 127.0.0.1:9464/metrics > "$out/metrics.txt" || true
grep -E '^attn_requests_total|^attn_request_duration_seconds_(sum|count)|^attn_queue_wait_seconds_(sum|count)|^attn_device_time_seconds_(sum|count)' "$out/metrics.txt"
kill -TERM %1; wait %1; echo "server exit $?"
echo "== total $SECONDS s"
