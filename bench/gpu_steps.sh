#!/usr/bin/env bash
# Steps the one-call GPU scripts share, as functions: source this file, with $out (the log folder)
# and optionally $g (the bundle made by ../shared/gpu/bundle; .gpu by default) set.

# gpu_tests FILTER SECONDS: each bundled attn_engine_tests* (bin/attn_engine_tests-<variant> is a
# variant's build, from bench/fused_variants.sh --tests) on the gtest FILTER, its log in
# $out/<binary>.log; the counts and failures echoed.
gpu_tests() {
  local filter=$1 limit=$2 bundle=${g:-.gpu} bin t
  for bin in "$bundle"/bin/attn_engine_tests*; do
    t=${bin##*/}
    timeout "$limit" stdbuf -oL -eL "$bundle/run" "$t" --gtest_filter="$filter" --gtest_brief=1 \
      > "$out/$t.log" 2>&1
    echo "$t exit code $? (124: timed out; a hang in a kernel shows as that)"
    grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/$t.log"
    grep -B2 -A8 'Failure' "$out/$t.log" | head -60
  done
}

# gpu_sanitize FILTER SECONDS TOOL...: compute-sanitizer's TOOL (memcheck, racecheck, synccheck)
# over attn_engine_tests on the gtest FILTER, its log in $out/<tool>.log; the summaries echoed.
gpu_sanitize() {
  local filter=$1 limit=$2 bundle=${g:-.gpu} cs tool
  shift 2
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in "$@"; do
    timeout "$limit" "$bundle/run" "$cs" --tool "$tool" --error-exitcode 3 attn_engine_tests \
      --gtest_filter="$filter" --gtest_brief=1 > "$out/$tool.log" 2>&1
    echo "$tool exit code $? ($(grep -cE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' \
      "$out/$tool.log") clean summaries)"
    grep -E 'SUMMARY|PASSED|FAILED' "$out/$tool.log" | head -4
  done
}
