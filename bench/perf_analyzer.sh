#!/usr/bin/env bash
# perf_analyzer (Triton's load generator, the PyPI package perf-analyzer) against a running
# attn-server over the Open Inference Protocol: one closed-loop run per concurrency level, their
# rows gathered in one CSV (perf_analyzer's own columns: throughput, client send/recv and the p50-p99
# latencies in microseconds). README's "perf_analyzer" section says how to read it beside attn's
# histograms.
#
#   bench/perf_analyzer.sh [--target=HOST:PORT] [--model=attention] [--shape=B,T,N,H]
#       [--kv_shape=B,S,K,H] [--concurrency=1,8,32] [--requests=2000] [--window_ms=5000]
#       [--max_rss_mib=M] [--timeout_s=600] [--out=perf_analyzer.csv] [--token=TOKEN]
#       [--ca_file=PEM] [-- PERF_ANALYZER_ARGS...]
#
# Defaults: localhost:50051, the codelab's shape B4 T128 N8 H64 (K and V as Q: S = T, K = N), in
# the models' advertised datatype (BF16); token $ATTN_TOKEN, CA $ATTN_TLS_CA_FILE (TLS when set).
# Inputs: two sets of normal(0, 1) values made here (perf_analyzer's own random bytes would hold
# NaNs in BF16, and zeros are no test), cycled request by request. Exits non-zero if any run
# fails; perf_analyzer fails a run on any request error.
#
# Measurement: each level sends exactly --requests requests and measures them as one window
# (perf_analyzer --request-count). --requests=0 instead runs perf_analyzer's stabilising windows of
# --window_ms, which are unbounded in memory with large tensors: perf_analyzer keeps a copy of every
# request's input and output bytes (its request records, kept for its profile export whether or not
# one is asked for) until its main thread summarises the window, copying each record twice more on
# the way. At the codelab's shape that is 2 MiB a request; once 2 MiB x the request rate outruns
# that one thread's copying, each window is longer than the one before and its memory grows until
# the OOM killer ends it (PERF.md, issue 25: ~130 GB at concurrency 8 on the H200). With a fixed
# count the load stops after --requests, so its memory is bounded by about 2 x --requests x the
# request's bytes (4 GB for 1000 requests at the codelab's shape).
# Guards, per level: perf_analyzer is killed if its resident memory passes --max_rss_mib (default:
# half of this machine's memory; 0: none) or it runs longer than --timeout_s (0: no limit). Each
# level prints perf_analyzer's peak resident memory (VmHWM, sampled every 0.2 s).
#
# perf_analyzer: $ATTN_PERF_ANALYZER, else the binary inside the perf_analyzer package of
# ${PYTHON:-python3}, else perf_analyzer on PATH. Its wheel needs glibc 2.38; on an older host set
# $ATTN_PA_RUNTIME to a folder made by bench/perf_analyzer_runtime.sh and it runs through that
# folder's loader.
set -euo pipefail
target=localhost:50051 model=attention shape=4,128,8,64 kv_shape= concurrency=1,8,32 window_ms=5000
requests=2000 max_rss_mib=$(awk '/^MemTotal:/ {print int($2 / 2048)}' /proc/meminfo) timeout_s=600
out=perf_analyzer.csv token=${ATTN_TOKEN:-} ca_file=${ATTN_TLS_CA_FILE:-}
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target=*) target=${1#*=} ;;
    --model=*) model=${1#*=} ;;
    --shape=*) shape=${1#*=} ;;
    --kv_shape=*) kv_shape=${1#*=} ;;
    --concurrency=*) concurrency=${1#*=} ;;
    --window_ms=*) window_ms=${1#*=} ;;
    --requests=*) requests=${1#*=} ;;
    --max_rss_mib=*) max_rss_mib=${1#*=} ;;
    --timeout_s=*) timeout_s=${1#*=} ;;
    --out=*) out=${1#*=} ;;
    --token=*) token=${1#*=} ;;
    --ca_file=*) ca_file=${1#*=} ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench/perf_analyzer.sh: unknown argument '$1' (see the header for the flags)" >&2; exit 2 ;;
  esac
  shift
done
kv_shape=${kv_shape:-$shape}

pa=${ATTN_PERF_ANALYZER:-}
if [ -z "$pa" ]; then
  pa=$("${PYTHON:-python3}" -c 'import os, perf_analyzer; print(os.path.join(os.path.dirname(perf_analyzer.__file__), "bin", "perf_analyzer"))' 2>/dev/null \
       || command -v perf_analyzer || true)
fi
[ -n "$pa" ] && [ -x "$pa" ] || { echo "bench/perf_analyzer.sh: no perf_analyzer (pip install perf-analyzer, or set ATTN_PERF_ANALYZER)" >&2; exit 2; }
pa_cmd=("$pa")
[ -z "${ATTN_PA_RUNTIME:-}" ] || pa_cmd=("$ATTN_PA_RUNTIME/ld-linux-x86-64.so.2"
  --library-path "$ATTN_PA_RUNTIME:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$pa")
# run_pa ARGS...: one perf_analyzer run, watched every 0.2 s: its peak resident memory (VmHWM) is
# printed after it, and it is killed past --max_rss_mib or --timeout_s. Returns its exit status.
run_pa() {
  "${pa_cmd[@]}" "$@" &
  local pid=$! start=$SECONDS rss=0 hwm=0 peak=0 state= key value rest why= rc=0
  while [ -r "/proc/$pid/status" ]; do
    while read -r key value rest; do
      case $key in
        State:) state=$value ;;
        VmRSS:) rss=$value ;;
        VmHWM:) hwm=$value ;;
      esac
    done <"/proc/$pid/status" 2>/dev/null || true
    [ "$state" != Z ] || break
    [ "$hwm" -le "$peak" ] || peak=$hwm
    if [ "$max_rss_mib" -gt 0 ] && [ $((rss / 1024)) -gt "$max_rss_mib" ]; then
      why="its resident memory passed --max_rss_mib=$max_rss_mib"
    elif [ "$timeout_s" -gt 0 ] && [ $((SECONDS - start)) -ge "$timeout_s" ]; then
      why="it ran past --timeout_s=$timeout_s"
    fi
    if [ -n "$why" ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
    sleep 0.2
  done
  wait "$pid" || rc=$?
  echo "perf_analyzer: peak RSS $((peak / 1024)) MiB, $((SECONDS - start)) s, exit $rc"
  if [ -n "$why" ]; then echo "bench/perf_analyzer.sh: perf_analyzer killed: $why" >&2; fi
  return "$rc"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# perf_analyzer's input-data JSON: {"data": [{"Q": {"b64": ..., "shape": [...]}, ...}, ...]}, BF16
# rounded to nearest even from float32. Plain Python, so any python3 makes it.
python3 - "$shape" "$kv_shape" >"$tmp/inputs.json" <<'PY'
import base64, json, random, struct, sys
def bf16(values):
    bits = struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values))
    return struct.pack(f"<{len(bits)}H", *(((b + 0x7FFF + ((b >> 16) & 1)) >> 16) & 0xFFFF for b in bits))
rng = random.Random(0)
shapes = {"Q": sys.argv[1], "K": sys.argv[2], "V": sys.argv[2]}
data = []
for _ in range(2):
    entry = {}
    for name, text in shapes.items():
        shape = [int(d) for d in text.split(",")]
        n = 1
        for d in shape:
            n *= d
        entry[name] = {"b64": base64.b64encode(bf16([rng.gauss(0, 1) for _ in range(n)])).decode(), "shape": shape}
    data.append(entry)
json.dump({"data": data}, sys.stdout)
PY
args=(-i grpc -u "$target" -m "$model" --shape "Q:$shape" --shape "K:$kv_shape" --shape "V:$kv_shape"
      --input-data "$tmp/inputs.json")
if [ "$requests" -gt 0 ]; then
  args+=(--request-count "$requests")
else
  args+=(--measurement-interval "$window_ms")
fi
[ -z "$token" ] || args+=(-H "authorization:Bearer $token")
[ -z "$ca_file" ] || args+=(--ssl-grpc-use-ssl --ssl-grpc-root-certifications-file "$ca_file")

rm -f "$out"
IFS=, read -ra levels <<<"$concurrency"
failed=()
for c in "${levels[@]}"; do
  if [ "$requests" -gt 0 ]; then measure="$requests requests"; else measure="windows of $window_ms ms"; fi
  echo "== perf_analyzer: $model Q[$shape] K,V[$kv_shape] concurrency $c on $target, $measure"
  # A failed level is reported at the end; the next level still runs.
  run_pa "${args[@]}" --concurrency-range "$c" -f "$tmp/c$c.csv" "${extra[@]}" || { failed+=("$c"); continue; }
  # One header, then every level's row.
  if [ ! -s "$out" ]; then head -n 1 "$tmp/c$c.csv" >"$out"; fi
  tail -n +2 "$tmp/c$c.csv" >>"$out"
done
echo "== $out"
cat "$out" 2>/dev/null || true
if [ ${#failed[@]} -gt 0 ]; then
  echo "bench/perf_analyzer.sh: perf_analyzer failed at concurrency ${failed[*]}" >&2
  exit 1
fi
