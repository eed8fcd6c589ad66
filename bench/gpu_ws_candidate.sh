#!/usr/bin/env bash
# One device call that decides whether a WS kernel candidate becomes the default (issue 23), most
# important first, each later step only while time is left (a deadline of 555 s of the 600 s a
# call may run): the judged H = 128 shapes (main, the candidate, our cudnn, the build with only
# the pinned wait), PyTorch SDPA's flash and cuDNN on them, main and the candidate again (drift),
# the variants at H = 64/96 and the codelab shapes, issue 24's decode step (gpu_decode.sh bench),
# then the candidate's tests and racecheck/synccheck. Eight logs in $OUT (as many as come back),
# so a call cut short still returns what it did; ATTN_CALL_SECONDS sets the deadline.
# Written for calls that are hard to get (2026-12-05/06: most machine starts failed), so one
# call answers the most it can.
#   bash bench/fused_variants.sh build .gpu-var --tests \
#     'ws-cand:128:-DATTN_FUSED_WS_PIN_PV_WAIT=1 -DATTN_FUSED_WS_ITEM_BARRIERS=1 -lineinfo' \
#     'ws-pin:128:-DATTN_FUSED_WS_PIN_PV_WAIT=1'
#   bash bench/fused_variants.sh build .gpu-var \
#     'ws-cand-pp:128:-DATTN_FUSED_WS_PIN_PV_WAIT=1 -DATTN_FUSED_WS_ITEM_BARRIERS=1 -DATTN_FUSED_WS_PINGPONG=1' \
#     'ws-h64-cand:64:-DATTN_FUSED_WS_PIN_PV_WAIT=1 -DATTN_FUSED_WS_ITEM_BARRIERS=1' \
#     'ws-h96-cand:96:-DATTN_FUSED_WS_PIN_PV_WAIT=1 -DATTN_FUSED_WS_ITEM_BARRIERS=1'
#   ../shared/gpu/bundle .gpu build/engine/attn-bench \
#     .gpu-var/attn-bench-ws-{pin,cand,cand-pp,h64-cand,h96-cand} .gpu-var/attn_engine_tests-ws-cand
#   (45 MiB)
#   run: bash bench/gpu_ws_candidate.sh, carry .gpu
set -u
out=${OUT:-/tmp/attn-gpu}; g=${ATTN_GPU_BUNDLE:-.gpu}; mkdir -p "$out"; s=$SECONDS
left() { echo $((${ATTN_CALL_SECONDS:-555} - (SECONDS - s))); }
source "$(dirname "$0")/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv
# ab BIN BACKEND TAG ARGS...: attn-bench BIN with the peers' protocol (10 warm-ups, median of
# 50 event-timed calls), the kernel the backend picks itself.
ab() {
  local bin=$1 be=$2 tag=$3; shift 3
  timeout 60 $g/run "$bin" --backend="$be" --dtypes=bfloat16 --warmup=10 --repeats=50 "$@" 2>&1 \
    | grep -E "^$be " | sed "s/^/[$tag] /"
}
echo "== judged H128 (t=$((SECONDS - s)) s)"
{
  gpu_judged attn-bench "" fused main
  gpu_judged attn-bench-ws-cand "" fused cand
  gpu_judged attn-bench "" cudnn cudnn
  gpu_judged attn-bench-ws-pin "" fused pin
} 2>&1 | tee "$out/judged.log"
echo "== peers H128 (t=$((SECONDS - s)) s)"
sh=()
for t in 4096 8192; do sh+=(--shape 4,$t,$t,16,16,128,causal --shape 4,$t,$t,16,16,128); done
for k in 32 8 1; do sh+=(--shape 4,2048,2048,32,$k,128,causal); done
PYTHONUNBUFFERED=1 timeout 150 python3 $g/peers.py "${sh[@]}" --impl torch_flash,torch_cudnn 2>&1 | grep -v Warn \
  | tee "$out/peers.log"
echo "== drift, then the variants (t=$((SECONDS - s)) s)"
{
  gpu_judged attn-bench "" fused main2
  gpu_judged attn-bench-ws-cand "" fused cand2
  [ "$(left)" -gt 350 ] && gpu_judged attn-bench-ws-cand-pp "" fused cand-pp
  for h in 64 96; do
    for c in --causal ""; do
      ab attn-bench fused main-h$h --batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192 $c
      ab attn-bench-ws-h$h-cand fused cand-h$h --batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192 $c
      ab attn-bench cudnn cudnn-h$h --batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192 $c
    done
  done
  codelab=(--batch=4 --heads=8 --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal)
  ab attn-bench fused codelab-main "${codelab[@]}"
  ab attn-bench-ws-h64-cand fused codelab-cand "${codelab[@]}"
} 2>&1 | tee "$out/variants.log"
echo "== decode (t=$((SECONDS - s)) s)"
[ "$(left)" -gt 200 ] && timeout $(($(left) - 120)) bash "$(dirname "$0")/gpu_decode.sh" bench
echo "== the candidate's tests (t=$((SECONDS - s)) s)"
l=$(left); [ "$l" -gt 200 ] && l=200
if [ "$l" -gt 30 ]; then
  timeout "$l" stdbuf -oL $g/run attn_engine_tests-ws-cand --gtest_brief=1 \
    --gtest_filter='*Fused*:Registry*:*KvLens*:*GpuPieces*' > "$out/tests-cand.log" 2>&1
  echo "tests exit code $? (124: timed out)"
  grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/tests-cand.log"
  grep -B2 -A8 Failure "$out/tests-cand.log" | head -30
fi
echo "== the candidate under racecheck and synccheck (t=$((SECONDS - s)) s)"
l=$(left)
[ "$l" -gt 60 ] && sanitize_bin=attn_engine_tests-ws-cand gpu_sanitize \
  '*FusedVersusReference*bfloat16_B2_T64_S256_N8_K8_H128*:*FusedVersusNaiveFloat32*bfloat16_B8_T1000_S1000_N8_K2_H128_causal' \
  $((l / 2)) racecheck synccheck
echo "== done (t=$((SECONDS - s)) s)"
