#!/usr/bin/env bash
# Sourced by the one-call GPU scripts: prints the card's state and runs every engine test from
# the bundle in .gpu, with the full log in $out/tests.log and failures echoed.
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
echo "== engine tests"
timeout 400 stdbuf -oL -eL .gpu/run attn_engine_tests --gtest_brief=1 > "$out/tests.log" 2>&1
echo "tests exit code $?"
grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/tests.log"
grep -B2 -A8 'Failure' "$out/tests.log" | head -80
