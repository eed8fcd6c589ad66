#!/usr/bin/env bash
# The steps of a device call, one function each (gpu_step_<name>), for bench/gpu.sh, which sources
# this file with $g (the bundle: programs in $g/bin, run through $g/run; bench/gpu_pack.sh makes
# it) and $out (the log folder) set and runs the steps named on its command line. What a step
# prints is the call's summary; its full logs go under $out. A program the bundle lacks is named
# and that part passed over. Timings follow the peers' protocol (10 warm-ups, the median of 50
# event-timed calls) and are taken in interleaved rounds, reported as each shape's minimum over
# the rounds' medians: a Hopper card's power cap moves every backend's median by up to 15% within
# a call (PERF.md), the same for ours and the peers.
# shellcheck disable=SC2154  # $g and $out: bench/gpu.sh sets them before sourcing this file.

# --- helpers --------------------------------------------------------------------------------

# gpu_has PROGRAM: whether the bundle holds PROGRAM; says so where it does not.
gpu_has() {
  [ -x "$g/bin/$1" ] && return 0
  echo "($1 is not in the bundle: passed over)"
  return 1
}

# gpu_gtest PROGRAM SECONDS [FILTER [ARG...]]: a bundled GoogleTest program on the gtest FILTER
# (default all) with ARGs within SECONDS, its log in $out/PROGRAM.log; its exit status, counts
# and failures echoed.
gpu_gtest() {
  local prog=$1 limit=$2 filter=${3:-*}
  shift $(($# < 3 ? $# : 3))
  gpu_has "$prog" || return 0
  timeout "$limit" stdbuf -oL -eL "$g/run" "$prog" --gtest_filter="$filter" --gtest_brief=1 "$@" \
    > "$out/$prog.log" 2>&1
  echo "$prog exit $? (124: timed out, as a kernel that hangs would)"
  grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/$prog.log"
  grep -B2 -A8 'Failure' "$out/$prog.log" | head -60
}

# gpu_bench TAG ARGS...: the bundled attn-bench (or the program named by $bench_bin) with the
# peers' protocol on ARGS (--backend=..., --fused_kernel=..., shape flags), within 60 s; its
# result lines, each tagged "[TAG] " where TAG is not empty (gpu_table then labels them TAG, not
# by their backend); its errors on stderr. Its whole output is kept in $out/attn-bench.log.
gpu_bench() {
  local tag=${1:+[$1] }
  shift
  timeout 60 "$g/run" "${bench_bin:-attn-bench}" --dtypes=bfloat16 --warmup=10 --repeats=50 "$@" \
    2>&1 | tee -a "$out/attn-bench.log" \
    | awk -v tag="$tag" '/^[a-z_0-9]+ +B=/ {print tag $0; next} /^attn-bench[^ ]*: / {print > "/dev/stderr"}'
}

# gpu_peers SHAPE...: PyTorch SDPA's flash (FlashAttention-2) and cuDNN backends on each
# B,T,S,N,K,H[,causal] SHAPE, one JSON line each (the bundle's peers.py, with the machine's
# python3: our libraries on the path could shadow torch's).
gpu_peers() {
  local args=() s
  for s in "$@"; do args+=(--shape "$s"); done
  PYTHONUNBUFFERED=1 timeout 300 python3 "$g/peers.py" "${args[@]}" --impl torch_flash,torch_cudnn \
    --format jsonl 2>&1 | grep '^{'
}

# gpu_table LOG SUBJECT: the table of LOG's timings (gpu_bench's tagged lines and gpu_peers' JSON
# lines) per shape, with SUBJECT's speed against each other label (bench/gpu_table.py).
gpu_table() {
  python3 "$(dirname "${BASH_SOURCE[0]}")/gpu_table.py" --subject="$2" "$1"
}

# gpu_compute_sanitizer: the path of compute-sanitizer (on the PATH or in /usr/local/cuda), or
# fails saying it is missing.
gpu_compute_sanitizer() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  [ -x "$cs" ] && echo "$cs" && return 0
  echo "(no compute-sanitizer on this machine: passed over)" >&2
  return 1
}

# gpu_sanitize FILTER SECONDS TOOL...: compute-sanitizer's TOOL (memcheck, racecheck, synccheck)
# over the bundled attn_engine_tests on the gtest FILTER, its log in $out/<tool>.log; the
# summaries echoed, and the source lines the reports name most. racecheck reports every hazard,
# one line per distinct pair of instructions (kernel + offset; cuobjdump -sass names them).
gpu_sanitize() {
  local filter=$1 limit=$2 cs tool log opts
  shift 2
  gpu_has attn_engine_tests || return 0
  cs=$(gpu_compute_sanitizer) || return 0
  for tool in "$@"; do
    log=$out/$tool.log
    opts=(--tool "$tool" --error-exitcode 3)
    [ "$tool" != racecheck ] || opts+=(--racecheck-report all --print-limit 0)
    timeout "$limit" "$g/run" "$cs" "${opts[@]}" attn_engine_tests \
      --gtest_filter="$filter" --gtest_brief=1 > "$log" 2>&1
    echo "$tool exit $? ($(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' \
      "$log") clean summaries)"
    grep -E 'SUMMARY|PASSED|FAILED' "$log" | head -4
    grep -oE '[A-Za-z_./]+\.cuh?:[0-9]+' "$log" | sort | uniq -c | sort -rn | head -8
    [ "$tool" != racecheck ] || grep -A1 'Error: Race reported between' "$log" | grep -v '^--' \
      | paste - - | sed -E 's/=+ *//g; s/Error: Race reported between //; s/attn::(fused::)?//g;
          s/\((int|bool)\)//g; s/ \[[0-9]+ hazards\]//; s/[[:space:]]+/ /g' \
      | sort | uniq -c | head -12
  done
}

# gpu_serve NAME PORT [FLAGS...]: the bundled server NAME on 127.0.0.1:PORT (no metrics port
# unless FLAGS give one), its log in $out/NAME-PORT.log, in the background; returns once it
# serves (at most 30 s), echoing its SERVING and error lines. gpu_stop_servers stops them all.
gpu_serve() {
  local name=$1 port=$2 log=$out/$1-$2.log
  shift 2
  "$g/run" "$name" --listen_address=127.0.0.1:"$port" --metrics_address= "$@" > "$log" 2>&1 &
  gpu_servers+=($!)
  for _ in $(seq 150); do
    grep -q 'SERVING' "$log" && break
    sleep 0.2
  done
  grep -hE 'SERVING|error' "$log" | cut -c1-160
}
gpu_servers=()
gpu_stop_servers() {
  [ ${#gpu_servers[@]} -gt 0 ] || return 0
  kill -TERM "${gpu_servers[@]}" 2>/dev/null
  wait "${gpu_servers[@]}" 2>/dev/null
  gpu_servers=()
}

# The judged shapes (issues 23 and 44): H128 at B4 N16 T 4096 and 8192, causal and not, and the
# GQA shapes B4 T2048 N32 K 32/8/1 causal; head dims 64, 96 and 256 at B4 N16 T 4096 and 8192,
# causal and not. As attn-bench flags (gpu_judged_flags) and as peers.py shapes (gpu_judged_shapes).
gpu_judged_flags=(
  "--batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192 --causal"
  "--batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192"
  "--batch=4 --heads=32 --kv_heads=32 --head_dim=128 --seq_lens=2048 --causal"
  "--batch=4 --heads=32 --kv_heads=8 --head_dim=128 --seq_lens=2048 --causal"
  "--batch=4 --heads=32 --kv_heads=1 --head_dim=128 --seq_lens=2048 --causal"
)
for h in 64 96 256; do
  gpu_judged_flags+=("--batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192 --causal"
                     "--batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192")
done
gpu_judged_shapes=()
for h in 128 64 96 256; do
  for t in 4096 8192; do
    gpu_judged_shapes+=("4,$t,$t,16,16,$h,causal" "4,$t,$t,16,16,$h")
  done
done
for k in 32 8 1; do gpu_judged_shapes+=("4,2048,2048,32,$k,128,causal"); done
unset h t k

# gpu_judged TAG FLAGS...: every judged shape on attn-bench (or $bench_bin) with FLAGS (the
# backend, --backend=fused, and any other), each result line tagged "[TAG] ".
gpu_judged() {
  local tag=$1 shape
  shift
  for shape in "${gpu_judged_flags[@]}"; do
    # shellcheck disable=SC2086
    gpu_bench "$tag" "$@" $shape
  done
}

# --- the steps ------------------------------------------------------------------------------

# tests: every engine test (and each variant's build, bin/attn_engine_tests-<variant>, after a
# probe on two small shapes: a binary that fails or hangs there is passed over, as a hung kernel
# would hold every test to the limit), then the server's GPU tests and the abuse test against the
# bundle's attn-server.
gpu_step_tests() {
  local bin t
  for bin in "$g"/bin/attn_engine_tests*; do
    [ -x "$bin" ] || { gpu_has attn_engine_tests; continue; }
    t=${bin##*/}
    if ! timeout 30 "$g/run" "$t" --gtest_brief=1 > "$out/$t-probe.log" 2>&1 \
      --gtest_filter='*FusedVersusReference*bfloat16_B2_T17_S17*:*FusedVersusReference*bfloat16_B2_T64_S256*'; then
      echo "$t: passed over, the small-shape probe failed (its log: $t-probe.log)"
      continue
    fi
    gpu_gtest "$t" 420
  done
  gpu_step_serving
}

# serving: the server's GPU tests (*Gpu*) and the abuse test against the bundle's attn-server, the
# part of `tests` that is not the engine's (for a call too short for every engine test).
gpu_step_serving() {
  ATTN_SERVER_BINARY=$g/bin/attn-server ATTN_BENCH_BINARY=$g/bin/attn-bench \
    ATTN_LOAD_BINARY=$g/bin/attn-load ATTN_SOURCE_DIR=$PWD gpu_gtest attn_server_tests 240 '*Gpu*'
  ATTN_SERVER_BINARY=$g/bin/attn-server gpu_gtest attn_abuse_tests 240
}

# sanitize: compute-sanitizer memcheck, racecheck and synccheck on small problems of every kernel
# we wrote (naive, each fused path forced in turn, split-KV among them, FP8's quantise kernels),
# then memcheck and synccheck on a warp-specialised run of 512 items, more than the SMs, of
# different causal lengths (several a persistent block).
gpu_step_sanitize() {
  gpu_sanitize 'NaiveBackend.*:*NaiveVersusReference*B2_T17_S17*:*FusedVersusReference*B2_T17_S17*:*FusedVersusReference*B2_T2_S700*:*FusedVersusReference*B1_T127_S33*:*FusedVersusReference*B2_T64_S256*:FusedBackend.ReadsStridedKv*:FusedBackend.PicksSplitKv*:*Fp8Kernels*' \
    200 memcheck racecheck synccheck
  gpu_has attn-bench || return 0
  local cs tool
  cs=$(gpu_compute_sanitizer) || return 0
  for tool in memcheck synccheck; do
    timeout 120 "$g/run" "$cs" --tool "$tool" --error-exitcode 3 attn-bench --backend=fused \
      --fused_kernel=wgmma_ws --dtypes=bfloat16 --batch=8 --heads=8 --kv_heads=2 --head_dim=128 \
      --seq_lens=1000 --causal --warmup=0 --repeats=1 > "$out/$tool-items.log" 2>&1
    echo "$tool, 512 warp-specialised items: exit $?"
    grep -E 'SUMMARY' "$out/$tool-items.log" | head -2
  done
}

# judged: the judged shapes on fused and our cudnn, interleaved (each shape: fused, then cudnn,
# in one process) over three rounds, with PyTorch SDPA's flash and cuDNN backends beside them in
# the same call; the table gives fused's speed against each (>= 1.0: fused as fast or faster).
gpu_step_judged() {
  gpu_has attn-bench || return 0
  local round log=$out/judged.log
  : > "$log"
  for round in 1 2 3; do
    gpu_judged "" --backend=fused,cudnn >> "$log"
  done
  gpu_peers "${gpu_judged_shapes[@]}" >> "$log"
  gpu_table "$log" fused
}

# decode: N32 K8 H128 bf16 decode shapes (B 1-64, T 1 and 16, S 4096-32768) on fused (split-KV,
# its automatic choice there) and our cudnn, three interleaved rounds, PyTorch SDPA beside; then
# ragged batches (kv_lens) on both.
gpu_step_decode() {
  gpu_has attn-bench || return 0
  local round shape b t s log=$out/decode.log peers=()
  local shapes=("16 1 8192" "1 1 32768" "16 16 8192" "4 1 8192" "64 1 4096" "1 1 4096")
  : > "$log"
  for round in 1 2 3; do
    for shape in "${shapes[@]}"; do
      read -r b t s <<< "$shape"
      gpu_bench "" --backend=fused,cudnn --arena_mib=32768 --batch="$b" --heads=32 --kv_heads=8 \
        --head_dim=128 --seq_lens="$t" --kv_len="$s" >> "$log"
    done
  done
  for shape in "${shapes[@]}"; do
    read -r b t s <<< "$shape"
    peers+=("$b,$t,$s,32,8,128")
  done
  gpu_peers "${peers[@]}" >> "$log"
  gpu_table "$log" fused
  local dec pre
  dec=$(seq -s, 512 512 8192)  # B16: 512, 1024, ..., 8192
  pre=1024,2048,3072,4096
  echo "-- ragged batches (kv_lens): fused and our cudnn, then PyTorch SDPA and JAX with the same mask"
  {
    gpu_bench "" --backend=fused,cudnn --arena_mib=32768 --batch=16 --heads=32 --kv_heads=8 \
      --head_dim=128 --seq_lens=1 --kv_len=8192 --kv_lens="$dec"
    gpu_bench "" --backend=fused,cudnn --batch=4 --heads=16 --head_dim=128 --seq_lens=4096 \
      --kv_lens="$pre" --causal
  } | tee "$out/ragged.log" | cut -c1-110
  for shape in "16,1,8192,32,8,128:$dec" "4,4096,4096,16,16,128,causal:$pre"; do
    PYTHONUNBUFFERED=1 timeout 120 python3 "$(dirname "${BASH_SOURCE[0]}")/ragged_peers.py" \
      --shape "${shape%%:*}" --kv-lens "${shape#*:}" 2>&1 | grep -v Warn | tee -a "$out/ragged.log"
  done
}

# naive: the codelab's first cell, our naive backend (B4 T1024 N8 H64, float32 and bfloat16,
# causal and not, and the sequence sweep T 64-1024), beside the same cell in JAX and eager
# PyTorch (bench/naive_peers.py) in the same call.
gpu_step_naive() {
  gpu_has attn-bench || return 0
  local c log=$out/naive.log
  for c in "" --causal; do
    # shellcheck disable=SC2086
    gpu_bench "" --backend=naive --dtypes=float32,bfloat16 --batch=4 --heads=8 --head_dim=64 \
      --seq_lens=64,128,256,512,1024 $c
  done | tee "$log" | cut -c1-110
  for c in "" --causal; do
    # shellcheck disable=SC2086
    PYTHONUNBUFFERED=1 timeout 240 python3 "$(dirname "${BASH_SOURCE[0]}")/naive_peers.py" \
      --shape 4,1024,8,64 $c 2>&1 | grep -v Warning | tee -a "$log"
  done
}

# fp8: the FP8 bar (B4 N16 H128 T8192 causal): cudnn_fp8, quantisation included, beside cudnn bf16,
# three interleaved rounds, the SM clock and power sampled while they run; the call in
# 1, 2 and 4 batch chunks; then the codelab's FP8 row through the runner (both timings, max
# |fp8 - bf16|, both errors against a float32 reference).
gpu_step_fp8() {
  gpu_has attn-bench || return 0
  local round chunks smi='' log=$out/fp8.log smi_log=$out/fp8-smi.csv
  local shape=(--batch=4 --heads=16 --head_dim=128 --seq_lens=8192 --causal)
  : > "$smi_log"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active \
      --format=csv,noheader -lms 50 > "$smi_log" 2>&1 &
    smi=$!
  fi
  : > "$log"
  for round in 1 2 3; do
    gpu_bench "" --backend=cudnn_fp8,cudnn "${shape[@]}" >> "$log"
  done
  for chunks in 1 2 4; do
    gpu_bench "cudnn_fp8 chunks=$chunks" --backend=cudnn_fp8 --fp8_chunks=$chunks "${shape[@]}" \
      >> "$log"
  done
  [ -z "$smi" ] || kill "$smi"
  gpu_table "$log" cudnn_fp8
  if [ -s "$smi_log" ]; then
    echo "SM clock MHz, power W while timing (min, median, max of $(wc -l < "$smi_log") samples):"
    for col in 2 3; do
      cut -d, -f$col "$smi_log" | awk '{print $1}' | sort -n \
        | awk '{v[NR] = $1} END {print v[1], v[int((NR + 1) / 2)], v[NR]}'
    done
  fi
  echo "-- the codelab's FP8 row (attn-bench --suite=codelab --sections='FP8 vs bf16')"
  timeout 120 "$g/run" attn-bench --suite=codelab --sections='FP8 vs bf16' --check_numerics \
    --warmup=20 --repeats=100 2>/dev/null | tee "$out/fp8-codelab.log"
}

# suites: the runner's suites as the cohort runs them: the codelab suite in one cold process (its
# wall time, plan builds included) with numerics checked, the large suite with numerics, and the
# JAX notebook's cells (bench/jax_codelab.py) for the wall-time comparison.
gpu_step_suites() {
  gpu_has attn-bench || return 0
  local t0=$SECONDS
  timeout 200 "$g/run" attn-bench --suite=codelab --check_numerics > "$out/codelab.txt" 2>/dev/null
  echo "codelab suite: exit $?, $((SECONDS - t0)) s wall in one cold process"
  grep -A3 '== correctness' "$out/codelab.txt"
  timeout 300 "$g/run" attn-bench --suite=large --check_numerics --arena_mib=20000 \
    > "$out/large.txt" 2>/dev/null
  echo "large suite: exit $? (full table: large.txt)"
  grep -E 'skipped' "$out/large.txt" | head -10
  PYTHONUNBUFFERED=1 timeout 240 python3 "$(dirname "${BASH_SOURCE[0]}")/jax_codelab.py" 2>&1 \
    | grep -vE 'Warning|warn' | tail -25
}

# server_ab: the judged shapes through attn-server, this build's beside the landed one (bundled as
# attn-server-base): both serve the GPU on loopback (no prewarm), and attn-load sends each shape's
# Attends (inputs generated on the server, timings only) to each in turn, two rounds; per run the
# end-to-end, server-total and device p50 in ms. attn-load's logs: $out/server-ab.log.
gpu_step_server_ab() {
  gpu_has attn-server && gpu_has attn-server-base && gpu_has attn-load || return 0
  local name shape round port
  gpu_serve attn-server 50061 --prewarm_suite=
  gpu_serve attn-server-base 50062 --prewarm_suite=
  for shape in "4,4096,16,128 --causal" "4,4096,16,128" "4,8192,16,128 --causal" "4,8192,16,128" \
               "4,2048,32,128 --kv_heads=32 --causal" "4,2048,32,128 --kv_heads=8 --causal" \
               "4,2048,32,128 --kv_heads=1 --causal" "4,128,8,64" "4,2048,8,64 --causal"; do
    for round in 1 2; do
      port=50061
      for name in attn-server attn-server-base; do
        # shellcheck disable=SC2086
        timeout 60 "$g/run" attn-load --target=127.0.0.1:$port --shape=$shape --dtype=bfloat16 \
          --upload=false --omit_output --calls=100 >> "$out/server-ab.log" 2>&1
        printf '%-16s round %d %-38s %s\n' "$name" "$round" "$shape" \
          "$(tail -2 "$out/server-ab.log" | grep -oE 'p50 [0-9.]+' | tr '\n' ' ')"
        port=$((port + 1))
      done
    done
  done
  gpu_stop_servers
}

# client: attn-client against attn-server on the GPU as the cohort drives it: the client's tests
# (against real servers), info, health, checked Attends, the codelab suite with --out
# ($out/codelab-report: results.csv, results.json, report.html), a sweep over two servers on the
# same GPU with round_robin, and the large suite on a budget; PyTorch SDPA at the codelab's
# default shape for scale.
gpu_step_client() {
  gpu_has attn-server && gpu_has attn-client || return 0
  ATTN_SERVER_BINARY=$g/bin/attn-server ATTN_CLIENT_BINARY=$g/bin/attn-client \
    ATTN_CLIENT_GOLDEN_DIR=$PWD/tests/client/golden gpu_gtest attn_client_tests 240
  gpu_serve attn-server 50051
  gpu_serve attn-server 50052 --arena_mib=2048
  local client=("$g/run" attn-client --target=127.0.0.1:50051) t0=$SECONDS
  "${client[@]}" info
  "${client[@]}" health
  "${client[@]}" attend --check
  "${client[@]}" attend --seq-len=1024 --causal --heads=8 --kv-heads=2 --check
  "${client[@]}" attend --dtype=float32 --backend=naive --check
  "${client[@]}" bench --suite codelab --check --out "$out/codelab-report" \
    2> "$out/codelab-progress.log"
  echo "codelab suite through attn-client: exit $?, $((SECONDS - t0)) s"
  "$g/run" attn-client --target=127.0.0.1:50051,127.0.0.1:50052 bench \
    --seq-lens=256,512,1024,2048,4096,8192 --heads=16 --head-dims=128 --backends=cudnn \
    --causal=true --out "$out/rr-report" > "$out/round-robin.log" 2>&1
  echo "round_robin over both servers: exit $? (round-robin.log)"
  "${client[@]}" bench --suite large --budget 1 --out "$out/large-report" 2>/dev/null | tail -40
  gpu_stop_servers
  gpu_peers "4,128,128,8,8,64"
}

# perf_analyzer: attn-server on the GPU at the codelab's default shape (B4 T128 N8 H64 bf16,
# inputs uploaded, the output returned) at concurrency 1, 8 and 32, driven by attn-load (Attend)
# and by Triton's perf_analyzer (ModelInfer over the Open Inference Protocol,
# bench/perf_analyzer.sh), then attn's own histograms of both RPCs. Needs the perf_analyzer wheel
# carried in .whl-pa (bench/perf_analyzer_wheels.sh); the participant quotas are raised so that
# one load generator may hold 32 calls (perf_analyzer's threads share a few connections).
gpu_step_perf_analyzer() {
  gpu_has attn-server && gpu_has attn-load || return 0
  local wheels=(.whl-pa/perf_analyzer-*.whl) c
  [ -f "${wheels[0]}" ] || { echo "(no perf_analyzer wheel in .whl-pa: passed over)"; return 0; }
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall("/tmp/pa")' "${wheels[0]}"
  chmod +x /tmp/pa/perf_analyzer/bin/perf_analyzer
  gpu_serve attn-server 50051 --metrics_address=127.0.0.1:9464 --participant_max_inflight=64 \
    --participant_max_queued=64 --participant_device_seconds=3600
  for c in 1 8 32; do
    echo "-- attn-load, $c clients"
    timeout -k 5 45 "$g/run" attn-load --shape=4,128,8,64 --dtype=bfloat16 --clients=$c \
      --calls=$((4000 / c + 500))
  done
  # A fixed request count a level bounds perf_analyzer's memory (bench/perf_analyzer.sh's
  # header); the address-space limit is a backstop, so an allocation past it fails in
  # perf_analyzer rather than in the OOM killer.
  (ulimit -v $((40 * 1024 * 1024))
   ATTN_PERF_ANALYZER=/tmp/pa/perf_analyzer/bin/perf_analyzer exec bash \
     "$(dirname "${BASH_SOURCE[0]}")/perf_analyzer.sh" --target=127.0.0.1:50051 \
     --concurrency=1,8,32 --requests=3000 --max_rss_mib=24576 --timeout_s=60 \
     --out="$out/perf_analyzer.csv") > "$out/perf_analyzer.log" 2>&1
  echo "perf_analyzer: exit $?"
  grep -E '^(Request concurrency|    (Throughput|p50|p99)|perf_analyzer: peak RSS)' \
    "$out/perf_analyzer.log"
  curl -s 127.0.0.1:9464/metrics > "$out/metrics.txt" || true
  grep -E '^attn_request_duration_seconds_(sum|count)|^attn_device_time_seconds_(sum|count)' \
    "$out/metrics.txt"
  gpu_stop_servers
}

# variants: each bundled bin/attn-bench-<variant> (a build with one change, made beside this
# one) beside this build's attn-bench on the judged shapes, two interleaved rounds; a variant
# whose small warp-specialised run fails or hangs within 20 s is passed over. $GPU_VARIANT_ARGS,
# where set, goes to every one of these attn-bench runs (e.g. --fused_kernel=wgmma_ws, to time a
# kernel at head dims where the automatic choice is another).
gpu_step_variants() {
  gpu_has attn-bench || return 0
  local round bin v log=$out/variants.log
  : > "$log"
  for round in 1 2; do
    for bin in "$g"/bin/attn-bench "$g"/bin/attn-bench-*; do
      [ -x "$bin" ] || continue
      v=${bin##*/}
      if [ "$v" != attn-bench ] && ! timeout 20 "$g/run" "$v" --backend=fused \
        --fused_kernel=wgmma_ws --dtypes=bfloat16 --batch=2 --heads=8 --kv_heads=2 --head_dim=128 \
        --seq_lens=1000 --causal --warmup=1 --repeats=2 > /dev/null 2>&1; then
        [ "$round" = 2 ] || echo "$v: passed over, a small warp-specialised run failed or hung"
        continue
      fi
      # shellcheck disable=SC2086
      bench_bin=$v gpu_judged "$v" --backend=fused ${GPU_VARIANT_ARGS:-} >> "$log"
    done
  done
  gpu_table "$log" attn-bench
}

# paths: what each fused kernel does where the automatic choice is in question (issue 44: head
# dim 256, head dim 64, problems of fewer query tiles than SMs, GQA): per shape, fused's automatic
# choice and our cudnn, then each path forced (wgmma_ws, wgmma, and mma_sync on the small ones),
# two interleaved rounds; the table gives the automatic choice's speed against each path and
# cudnn (a forced path faster than "fused": the heuristic should pick it there).
gpu_step_paths() {
  gpu_has attn-bench || return 0
  local round shape path paths log=$out/paths.log
  local shapes=(
    "--batch=4 --heads=16 --head_dim=256 --seq_lens=4096,8192"
    "--batch=4 --heads=16 --head_dim=256 --seq_lens=4096,8192 --causal"
    "--batch=2 --heads=8 --head_dim=256 --seq_lens=1024,2048 --causal"
    "--batch=4 --heads=16 --head_dim=64 --seq_lens=4096,8192"
    "--batch=4 --heads=16 --head_dim=64 --seq_lens=4096,8192 --causal"
    "--batch=8 --heads=16 --head_dim=64 --seq_lens=2048"
    "--batch=4 --heads=8 --head_dim=64 --seq_lens=512,2048 --causal"
    "--batch=8 --heads=32 --kv_heads=8 --head_dim=128 --seq_lens=512 --causal"
    "--batch=1 --heads=16 --head_dim=128 --seq_lens=1024,2048"
  )
  : > "$log"
  for round in 1 2; do
    for shape in "${shapes[@]}"; do
      paths="wgmma_ws wgmma"
      case $shape in *seq_lens=512* | *seq_lens=1024*) paths="$paths mma_sync" ;; esac
      # shellcheck disable=SC2086
      {
        gpu_bench "" --backend=fused,cudnn $shape
        for path in $paths; do gpu_bench "fused $path" --backend=fused --fused_kernel=$path $shape; done
      } >> "$log"
    done
  done
  gpu_table "$log" fused
}

# l4: the L4's code on this Hopper GPU. The sm_89 build's programs (bench/gpu_pack.sh
# --sm89=BUILD bundles them as sm89-attn_engine_tests and sm89-attn-bench) hold only compute_89
# PTX, which the driver JIT-compiles for this card (cached under /tmp, up to 4 GiB, so a kernel
# compiles once a machine), and run with the dispatch capped at sm_89 (--device_cap: compute
# capability 8.9, the L4's shared memory and SMs), so every backend takes the paths an L4 takes:
# cudnn up to H = 128, fused on mma.sync and cp.async split-KV, cudnn_fp8 refused. A probe (the
# DeviceCapGpu tests, most of its time the JIT), then every engine test; then the judged H128
# shapes (B4 N16 T 4096/8192 +- causal, and B1 N16 T32768 causal), two interleaved rounds: the
# sm_89 build's fused beside the sm_90a attn-bench's fused, its mma.sync kernel forced (the same
# kernel as native sm_90a code) and cudnn; the table gives the sm_89 fused's speed against each.
gpu_step_l4() {
  gpu_has sm89-attn_engine_tests || return 0
  local -x CUDA_CACHE_PATH=/tmp/attn-cuda-cache CUDA_CACHE_MAXSIZE=4294967296
  local t0=$SECONDS round shape log=$out/l4.log
  local shapes=("${gpu_judged_flags[@]:0:2}"
                "--batch=1 --heads=16 --head_dim=128 --seq_lens=32768 --causal")
  timeout 180 "$g/run" sm89-attn_engine_tests --device_cap=sm_89 --gtest_brief=1 \
    --gtest_filter='DeviceCapGpu.*' > "$out/sm89-probe.log" 2>&1
  local rc=$?
  echo "probe, DeviceCapGpu.* capped at sm_89 (JIT included): exit $rc, $((SECONDS - t0)) s"
  grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/sm89-probe.log"
  if [ $rc -ne 0 ]; then
    echo "sm89-attn_engine_tests: passed over, the probe failed (its log: sm89-probe.log)"
    grep -B2 -A8 'Failure' "$out/sm89-probe.log" | head -40
  else
    t0=$SECONDS
    gpu_gtest sm89-attn_engine_tests 360 '*' --device_cap=sm_89
    echo "(every engine test capped at sm_89: $((SECONDS - t0)) s)"
  fi
  gpu_has sm89-attn-bench && gpu_has attn-bench || return 0
  : > "$log"
  for round in 1 2; do
    for shape in "${shapes[@]}"; do
      # shellcheck disable=SC2086
      {
        bench_bin=sm89-attn-bench gpu_bench "sm89 fused" --backend=fused --device_cap=sm_89 $shape
        gpu_bench "" --backend=fused,cudnn $shape
        gpu_bench "sm90a mma_sync" --backend=fused --fused_kernel=mma_sync $shape
      } >> "$log"
    done
  done
  grep -m1 'capped at' "$out/attn-bench.log"
  gpu_table "$log" "sm89 fused"
}

# notebook: the codelab notebook headless against attn-server on the GPU beside the JAX notebook
# cells (client/python/gpu_notebook.sh; needs the wheels it names carried in .whl).
gpu_step_notebook() {
  BUNDLE=$g OUT=$out bash client/python/gpu_notebook.sh
}
