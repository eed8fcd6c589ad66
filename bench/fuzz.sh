#!/usr/bin/env bash
# Runs the request fuzzer (tests/server/request_fuzz_test.cc) for long: seeded mutations of
# valid requests through validation and admission in process, then a stream of malformed,
# oversized and cancelled requests against a real attn-server whose resident memory must stay
# flat. CI runs the same test for 12 s with seed 1.
#
#   bench/fuzz.sh [seconds (default 600)] [seed (default: from the clock)] [build dir (default build)]
#
# A failure prints the seed: rerun with it, then add the input to Regressions() in the test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
seed=${2:-$(date +%s)}
build=${3:-build}
[ -x "$build/tests/attn_fuzz_tests" ] || { echo "fuzz: build $build first (scripts/test.sh or cmake --build $build)"; exit 2; }
echo "fuzz: ${seconds} s, seed $seed"
ATTN_FUZZ_SECONDS=$seconds ATTN_FUZZ_SEED=$seed "$build/tests/attn_fuzz_tests" 2>&1 | grep -vE '^\[20' || {
  echo "fuzz: FAILED with seed $seed"
  exit 1
}
