#!/usr/bin/env bash
# perf_analyzer (Triton's load generator, the PyPI package perf-analyzer) against a running
# attn-server over the Open Inference Protocol: one closed-loop run per concurrency level, their
# rows gathered in one CSV (perf_analyzer's own columns: throughput, client send/recv and the p50-p99
# latencies in microseconds). README's "perf_analyzer" section says how to read it beside attn's
# histograms.
#
#   bench/perf_analyzer.sh [--target=HOST:PORT] [--model=attention] [--shape=B,T,N,H]
#       [--kv_shape=B,S,K,H] [--concurrency=1,8,32] [--window_ms=5000] [--out=perf_analyzer.csv]
#       [--token=TOKEN] [--ca_file=PEM] [-- PERF_ANALYZER_ARGS...]
#
# Defaults: localhost:50051, the codelab's shape B4 T128 N8 H64 (K and V as Q: S = T, K = N), in
# the models' advertised datatype (BF16); token $ATTN_TOKEN, CA $ATTN_TLS_CA_FILE (TLS when set).
# Inputs: two sets of normal(0, 1) values made here (perf_analyzer's own random bytes would hold
# NaNs in BF16, and zeros are no test), cycled request by request. Exits non-zero if any run
# fails; perf_analyzer fails a run on any request error.
#
# perf_analyzer: $ATTN_PERF_ANALYZER, else the binary inside the perf_analyzer package of
# ${PYTHON:-python3}, else perf_analyzer on PATH. Its wheel needs glibc 2.38; on an older host set
# $ATTN_PA_RUNTIME to a folder made by bench/perf_analyzer_runtime.sh and it runs through that
# folder's loader.
set -euo pipefail
target=localhost:50051 model=attention shape=4,128,8,64 kv_shape= concurrency=1,8,32 window_ms=5000
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
run_pa() {
  if [ -n "${ATTN_PA_RUNTIME:-}" ]; then
    "$ATTN_PA_RUNTIME/ld-linux-x86-64.so.2" \
      --library-path "$ATTN_PA_RUNTIME:/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu" "$pa" "$@"
  else
    "$pa" "$@"
  fi
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
      --input-data "$tmp/inputs.json" --measurement-interval "$window_ms")
[ -z "$token" ] || args+=(-H "authorization:Bearer $token")
[ -z "$ca_file" ] || args+=(--ssl-grpc-use-ssl --ssl-grpc-root-certifications-file "$ca_file")

rm -f "$out"
IFS=, read -ra levels <<<"$concurrency"
for c in "${levels[@]}"; do
  echo "== perf_analyzer: $model Q[$shape] K,V[$kv_shape] concurrency $c on $target"
  run_pa "${args[@]}" --concurrency-range "$c" -f "$tmp/c$c.csv" "${extra[@]}"
  # One header, then every level's row.
  if [ ! -s "$out" ]; then head -n 1 "$tmp/c$c.csv" >"$out"; fi
  tail -n +2 "$tmp/c$c.csv" >>"$out"
done
echo "== $out"
cat "$out"
