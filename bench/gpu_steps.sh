#!/usr/bin/env bash
# Steps the one-call GPU scripts share, as functions: source this file, with $out (the log folder)
# and optionally $g (the bundle made by ../shared/gpu/bundle; .gpu by default) set.

# gpu_tests FILTER SECONDS: each bundled attn_engine_tests* (bin/attn_engine_tests-<variant> is a
# variant's build, from bench/fused_variants.sh --tests) on the gtest FILTER, its log in
# $out/<binary>.log; the counts and failures echoed. A binary that fails or hangs on two small
# shapes (every kernel, 30 s) is skipped: a hung kernel would otherwise hold every test to the
# limit (2026-12-05: a variant's register budget hung each forced-WS test).
gpu_tests() {
  local filter=$1 limit=$2 bundle=${g:-.gpu} bin t rc
  for bin in "$bundle"/bin/attn_engine_tests*; do
    t=${bin##*/}
    timeout 30 "$bundle/run" "$t" --gtest_brief=1 \
      --gtest_filter='*FusedVersusReference*bfloat16_B2_T17_S17*:*FusedVersusReference*bfloat16_B2_T64_S256*' \
      > "$out/$t.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      echo "$t: skipped, the small-shape probe exited $rc (124: timed out)"
      grep -B2 -A8 'Failure' "$out/$t.log" | head -20
      continue
    fi
    timeout "$limit" stdbuf -oL -eL "$bundle/run" "$t" --gtest_filter="$filter" --gtest_brief=1 \
      > "$out/$t.log" 2>&1
    echo "$t exit code $? (124: timed out; a hang in a kernel shows as that)"
    grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/$t.log"
    grep -B2 -A8 'Failure' "$out/$t.log" | head -60
  done
}

# gpu_sanitize FILTER SECONDS TOOL...: compute-sanitizer's TOOL (memcheck, racecheck, synccheck)
# over attn_engine_tests (or the bundled binary $sanitize_bin names, e.g. a variant's build) on
# the gtest FILTER, its log in $out/<tool>[-<binary>].log; the summaries echoed, and the source
# lines the reports name most (where the binary carries -lineinfo). racecheck reports every
# hazard in full.
gpu_sanitize() {
  local filter=$1 limit=$2 bundle=${g:-.gpu} bin=${sanitize_bin:-attn_engine_tests} cs tool log opts
  shift 2
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in "$@"; do
    log=$out/$tool${sanitize_bin:+-$sanitize_bin}.log
    opts=(--tool "$tool" --error-exitcode 3)
    [ "$tool" != racecheck ] || opts+=(--racecheck-report all --print-limit 0)
    timeout "$limit" "$bundle/run" "$cs" "${opts[@]}" "$bin" \
      --gtest_filter="$filter" --gtest_brief=1 > "$log" 2>&1
    echo "$bin $tool exit code $? ($(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' \
      "$log") clean summaries)"
    grep -E 'SUMMARY|PASSED|FAILED' "$log" | head -4
    grep -oE '[A-Za-z_./]+\.cuh?:[0-9]+' "$log" | sort | uniq -c | sort -rn | head -8
    # racecheck's own summary, one line per distinct pair of instructions (kernel + offset,
    # cuobjdump -sass names them): a pair not seen before is a new hazard to read.
    [ "$tool" != racecheck ] || grep -A1 'Error: Race reported between' "$log" | grep -v '^--' \
      | paste - - | sed -E 's/=+ *//g; s/Error: Race reported between //; s/attn::(fused::)?//g;
          s/\((int|bool)\)//g; s/\(FusedParams[^)]*\)//g; s/ \[[0-9]+ hazards\]//; s/[[:space:]]+/ /g' \
      | sort | uniq -c | head -12
  done
}

# gpu_bench_probe BIN: whether attn-bench BIN (bin/attn-bench-<variant>) finishes a small forced-WS
# problem within 20 s; echoes why not. Run it before a variant's timings, whose runs would each
# wait out their timeout on a kernel that hangs.
gpu_bench_probe() {
  local bin=$1 bundle=${g:-.gpu} rc
  ATTN_FUSED_KERNEL=wgmma_ws timeout 20 "$bundle/run" "$bin" --backend=fused --dtypes=bfloat16 \
    --batch=2 --heads=8 --kv_heads=2 --head_dim=128 --seq_lens=1000 --causal --warmup=1 \
    --repeats=2 > /dev/null 2>&1
  rc=$?
  [ $rc -eq 0 ] || echo "$bin: skipped, a small forced-WS run exited $rc (124: timed out)"
  return $rc
}

# gpu_judged BIN KERNEL [BACKEND [TAG]]: issue 23's judged H = 128 shapes (B4 N16 T 4096 and 8192,
# causal and not; GQA B4 T2048 N32 K 32/8/1 causal) on attn-bench BIN (bin/attn-bench-<variant>
# for a variant) with the peers' protocol (10 warm-ups, median of 50 event-timed calls),
# ATTN_FUSED_KERNEL=KERNEL where it is not empty; each result line tagged "[TAG] " (by default
# "[BIN KERNEL] ", KERNEL "auto" where empty).
gpu_judged() {
  local bin=$1 kernel=$2 backend=${3:-fused} bundle=${g:-.gpu} c k
  local tag=${4:-$bin ${kernel:-auto}}
  _gpu_judged_one() {
    timeout 60 env ${kernel:+ATTN_FUSED_KERNEL=$kernel} "$bundle/run" "$bin" --backend="$backend" \
      --dtypes=bfloat16 --warmup=10 --repeats=50 "$@" 2>&1 | grep -E "^$backend " | sed "s/^/[$tag] /"
  }
  for c in --causal ""; do
    _gpu_judged_one --batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192 $c
  done
  for k in 32 8 1; do
    _gpu_judged_one --batch=4 --heads=32 --kv_heads=$k --head_dim=128 --seq_lens=2048 --causal
  done
}

# gpu_server_ab NEW BASE: the judged shapes through attn-server (bundled programs NEW and BASE, the
# landed one) beside each other: both serve the same GPU on loopback (no prewarm), and attn-load
# sends each shape's Attends (inputs generated on the server, timings only) to NEW, BASE, NEW,
# BASE; per run the end-to-end, server-total and device p50 in ms. Logs in $out/server-ab.log.
gpu_server_ab() {
  local new=$1 base=$2 bundle=${g:-.gpu} port=50061 name shape
  for name in "$new" "$base"; do
    "$bundle/run" "$name" --listen_address=127.0.0.1:$port --metrics_address= --prewarm_suite= \
      > "$out/$name.log" 2>&1 &
    port=$((port + 1))
  done
  for _ in $(seq 150); do
    [ "$(grep -l 'SERVING' "$out/$new.log" "$out/$base.log" 2>/dev/null | wc -l)" = 2 ] && break
    sleep 0.2
  done
  grep -hE 'SERVING|error' "$out/$new.log" "$out/$base.log" | cut -c1-160
  for shape in "4,4096,16,128 --causal" "4,4096,16,128" "4,8192,16,128 --causal" "4,8192,16,128" \
               "4,2048,32,128 --kv_heads=32 --causal" "4,2048,32,128 --kv_heads=8 --causal" \
               "4,2048,32,128 --kv_heads=1 --causal" "4,128,8,64" "4,2048,8,64 --causal"; do
    for round in 1 2; do
      port=50061
      for name in "$new" "$base"; do
        # shellcheck disable=SC2086
        timeout 60 "$bundle/run" attn-load --target=127.0.0.1:$port --shape=$shape \
          --dtype=bfloat16 --upload=false --omit_output --calls=100 >> "$out/server-ab.log" 2>&1
        printf '%-14s round %d %-42s %s\n' "$name" "$round" "$shape" \
          "$(tail -2 "$out/server-ab.log" | grep -oE 'p50 [0-9.]+' | tr '\n' ' ')"
        port=$((port + 1))
      done
    done
  done
  kill %1 %2 2>/dev/null
  wait 2>/dev/null
}
