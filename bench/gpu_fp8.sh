#!/usr/bin/env bash
# One device call for the cudnn_fp8 backend (issue 8): the FP8 tests, then the judged benchmark
# (B=4, N=16, H=128, T=S=8192 causal: cudnn bf16 vs cudnn_fp8, interleaved three times, each FP8
# step then timed alone; the call in 1, 2 and 4 chunks; clocks and power sampled), then the
# codelab's FP8 row through the runner (B=4, T=2048, N=8, H=64, causal: both timings,
# max |fp8 - bf16| and both errors vs a float32 reference). Logs in $OUT.
#   bash bench/gpu_fp8.sh [bundle dir, default .gpu-fp8]
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
gpu=${1:-.gpu-fp8}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
echo "== FP8 tests (and the registry's)"
timeout 240 stdbuf -oL -eL "$gpu/run" attn_engine_tests --gtest_brief=1 \
  --gtest_filter='*Fp8*:*E4M3*:*DelayedScaling*:Registry.*' > "$out/fp8_tests.log" 2>&1
echo "tests exit code $?"
grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/fp8_tests.log"
grep -B2 -A8 'Failure' "$out/fp8_tests.log" | head -60
grep -A1 ': Skipped$' "$out/fp8_tests.log" | grep -vE ': Skipped$|^--$' | sort | uniq -c | head -20
grep -E '^fp8 measured' "$out/fp8_tests.log" | sed 's/, worst element.*| emulated/ | emulated/'

echo "== judged: B=4 N=16 H=128 T=S=8192 causal, bf16 cudnn vs cudnn_fp8 (warmup 20, repeats 100)"
# Both run at the 700 W power cap after a few hundred ms (SM clock ~1.5-1.7 GHz instead of 1.98):
# the GPU's clock, power and throttle reasons are sampled beside every timed run.
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active \
  --format=csv,noheader -lms 50 > "$out/fp8_smi.csv" 2>&1 &
smi=$!
b() { "$gpu/run" attn-bench --dtypes=bfloat16 --warmup=20 --repeats=100 "$@"; }
for round in 1 2 3; do
  b --backend=cudnn,cudnn_fp8 --batch=4 --heads=16 --head_dim=128 --seq_lens=8192 --causal
done 2>&1 | grep -vE '^\* GB' | tee "$out/fp8_judged.log"
echo "== the call in 1, 2 and 4 batch chunks (ATTN_FP8_CHUNKS; the default picks 4 here)"
for chunks in 1 2 4; do
  ATTN_FP8_CHUNKS=$chunks b --backend=cudnn_fp8 --batch=4 --heads=16 --head_dim=128 --seq_lens=8192 \
    --causal 2>&1 | grep -E '^cudnn_fp8' | sed "s/^cudnn_fp8/chunks=$chunks/"
done | tee -a "$out/fp8_judged.log"
echo "== judged again, autotuned plans (every engine timed on the call's buffers, fastest kept)"
b --backend=cudnn,cudnn_fp8 --autotune --batch=4 --heads=16 --head_dim=128 --seq_lens=8192 --causal 2>&1 \
  | grep -vE '^\* GB|^device' | tee -a "$out/fp8_judged.log"
echo "== context: the same without the mask, and T=4096 causal"
b --backend=cudnn,cudnn_fp8 --batch=4 --heads=16 --head_dim=128 --seq_lens=8192 2>&1 \
  | grep -vE '^\* GB|^device' | tee -a "$out/fp8_judged.log"
b --backend=cudnn,cudnn_fp8 --batch=4 --heads=16 --head_dim=128 --seq_lens=4096 --causal 2>&1 \
  | grep -vE '^\* GB|^device' | tee -a "$out/fp8_judged.log"
kill $smi
echo "SM clock MHz / power W while timing (min, median, max over $(wc -l < "$out/fp8_smi.csv") samples):"
for col in 2 3; do
  cut -d, -f$col "$out/fp8_smi.csv" | awk '{print $1}' | sort -n \
    | awk '{v[NR]=$1} END {print v[1], v[int((NR+1)/2)], v[NR]}'
done

echo "== the codelab's FP8 row through the runner (check_numerics; recipe state per case)"
"$gpu/run" attn-bench --suite=codelab --sections='FP8 vs bf16' --check_numerics --warmup=20 \
  --repeats=100 2>/dev/null | tee "$out/fp8_codelab.log"
"$gpu/run" attn-bench --suite=codelab --sections='FP8 vs bf16' --check_numerics --warmup=20 \
  --repeats=100 --format=json 2>/dev/null > "$out/fp8_codelab.json"
