#!/usr/bin/env bash
# One device call for the warp-specialised wgmma kernel (issue 23, fused_wgmma_ws.cuh): its tests
# and compute-sanitizer, then the ladder: the cp.async wgmma kernel, the
# warp-specialised one, its variants with one step switched off (bundled as
# bin/attn-bench-ws-<name>, built by bench/fused_variants.sh), our cudnn and PyTorch SDPA's flash
# and cuDNN backends on the judged shapes, and ncu's tensor-pipe reading of both kernels.
#   bash bench/gpu_fused_ws.sh [tests] [sanitize] [bench] [variants] [ncu]
#   (default: tests sanitize; all five took 130 s on an H100, 2026-12-05, before the ncu step's
#   GQA pair)
# ATTN_TEST_FILTER and ATTN_TEST_TIMEOUT (seconds) narrow the tests step.
# carry: .gpu (../shared/gpu/bundle .gpu build/tests/attn_engine_tests build/engine/attn-bench
#   .gpu-var/attn-bench-ws-* .gpu-var/attn_engine_tests-ws-*). Logs under $OUT (only 8 files
#   come back: the step logs first). E.g. one block an item instead of the dynamic scheduler,
#   tests included: bash bench/fused_variants.sh build .gpu-var --tests 'ws-static:128:-DATTN_FUSED_WS_DYNAMIC=0'
#   Ping-pong: 'ws-pp:128:-DATTN_FUSED_WS_PINGPONG=1'. A build of another commit bundled as
#   bin/attn-bench-ws-<name> (or ws-h<H>-<name> for head dim H) is timed beside this one the same way.
#   (the sanitize step runs racecheck and synccheck on every bundled attn_engine_tests-ws-*).
# The sanitize step's 512-item run uses attn-bench; run it on a variant's binary by hand.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
g=${ATTN_GPU_BUNDLE:-.gpu}
mkdir -p "$out"
steps=${*:-tests sanitize}
has() { [[ " $steps " == *" $1 "* ]]; }
source "$(dirname "$0")/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv

if has tests; then
  echo "== fused (every kernel, wgmma_ws among them), registry, kv_lens and pieces tests"
  echo "   (bin/attn_engine_tests-<variant>: a variant's build, from fused_variants.sh --tests)"
  gpu_tests "${ATTN_TEST_FILTER:-*Fused*:Registry*:*KvLens*:*GpuPieces*}" "${ATTN_TEST_TIMEOUT:-420}"
fi

if has sanitize; then
  echo "== compute-sanitizer: small problems on every kernel, then a forced-WS run of 512 items"
  gpu_sanitize '*FusedVersusReference*B2_T17_S17*:*FusedVersusReference*B1_T127_S33*:*FusedVersusReference*B2_T64_S256*:FusedBackend.ReadsStridedKv*' \
    150 memcheck racecheck synccheck
  # The variants' test builds (fused_variants.sh --tests, bin/attn_engine_tests-ws-<variant>)
  # under racecheck (every hazard reported, with source lines where the variant has -lineinfo:
  # 'ws-lineinfo:128:-lineinfo') and synccheck, on a small H = 128 shape (one item a block) and
  # B8 T1000 causal (512 items of different lengths, several a block), every path forced in turn.
  for bin in "$g"/bin/attn_engine_tests-ws-*; do
    [ -x "$bin" ] || continue
    sanitize_bin=${bin##*/} gpu_sanitize \
      '*FusedVersusReference*bfloat16_B2_T64_S256_N8_K8_H128*:*FusedVersusNaiveFloat32*bfloat16_B8_T1000_S1000_N8_K2_H128_causal' \
      200 racecheck synccheck
  done
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # B8 T1000 N8 H128: 512 items, more than the SMs, causal lengths differing (WS forced).
  for tool in memcheck synccheck; do
    ATTN_FUSED_KERNEL=wgmma_ws timeout 120 $g/run "$cs" --tool $tool --error-exitcode 3 attn-bench \
      --backend=fused --dtypes=bfloat16 --batch=8 --heads=8 --kv_heads=2 --head_dim=128 --seq_lens=1000 \
      --causal --warmup=0 --repeats=1 > "$out/$tool-items.log" 2>&1
    echo "$tool (512 items, attn-bench) exit code $?"
    grep -E 'SUMMARY' "$out/$tool-items.log" | head -2
  done
fi

other_heads() {
  local kernel=$1 backend=${2:-fused}
  for h in 64 96 256; do
    for c in --causal ""; do
      timeout 60 env ${kernel:+ATTN_FUSED_KERNEL=$kernel} $g/run attn-bench --backend=$backend --dtypes=bfloat16 --warmup=10 \
        --repeats=50 --batch=4 --heads=16 --head_dim=$h --seq_lens=4096,8192 $c 2>&1 | grep -E "^$backend " \
        | sed "s/^/[H$h ${kernel:-auto}] /"
    done
  done
  timeout 60 env ${kernel:+ATTN_FUSED_KERNEL=$kernel} $g/run attn-bench --backend=$backend --dtypes=bfloat16 --warmup=20 \
    --repeats=100 --batch=4 --heads=8 --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal 2>&1 \
    | grep -E "^$backend " | sed "s/^/[codelab ${kernel:-auto}] /"
}
if has bench; then
  echo "== H128 judged shapes: wgmma (before), wgmma_ws, our cudnn"
  { gpu_judged attn-bench wgmma; gpu_judged attn-bench wgmma_ws; gpu_judged attn-bench "" cudnn; } 2>&1 \
    | tee "$out/judged.log"
  echo "== head dims 64, 96, 256 and the codelab shapes: wgmma, wgmma_ws, our cudnn"
  { other_heads wgmma; other_heads wgmma_ws; other_heads ""; other_heads "" cudnn; } 2>&1 | tee "$out/heads.log"
  echo "== peers: PyTorch SDPA flash (FlashAttention-2) and cuDNN"
  shapes=()
  for h in 128 64 96 256; do
    for t in 4096 8192; do shapes+=(--shape 4,$t,$t,16,16,$h,causal --shape 4,$t,$t,16,16,$h); done
  done
  for k in 32 8 1; do shapes+=(--shape 4,2048,2048,32,$k,128,causal); done
  PYTHONUNBUFFERED=1 timeout 240 python3 $g/peers.py "${shapes[@]}" --impl torch_flash,torch_cudnn 2>&1 \
    | grep -v Warn | tee "$out/peers.log"
  echo "== H128 again (drift)"
  { gpu_judged attn-bench wgmma; gpu_judged attn-bench wgmma_ws; } 2>&1 | tee -a "$out/judged.log"
fi

if has variants; then
  echo "== the ladder: wgmma_ws with one step changed (bin/attn-bench-ws-<variant>)"
  # ws-h<H>-*: a variant of head dim H's tiles (B4 N16 T 4096/8192); the others are H = 128's.
  for bin in $g/bin/attn-bench-ws-*; do
    v=${bin##*/}
    gpu_bench_probe "$v" || continue
    if [[ $v =~ ws-h([0-9]+) ]]; then
      for c in --causal ""; do
        timeout 60 env ATTN_FUSED_KERNEL=wgmma_ws $g/run $v --backend=fused --dtypes=bfloat16 --warmup=10 \
          --repeats=50 --batch=4 --heads=16 --head_dim=${BASH_REMATCH[1]} --seq_lens=4096,8192 $c 2>&1 \
          | grep -E '^fused ' | sed "s/^/[$v wgmma_ws] /"
      done
    else
      gpu_judged "$v" wgmma_ws
    fi
  done 2>&1 | tee "$out/variants.log"
fi

if has ncu; then
  echo "== ncu: B4 T=S=4096 N16 H128 bf16 non-causal, wgmma then wgmma_ws"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for kernel in wgmma wgmma_ws; do
    ATTN_FUSED_KERNEL=$kernel timeout 90 $g/run "$ncu" --clock-control none -k regex:Fused -c 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats \
      attn-bench --backend=fused --dtypes=bfloat16 --batch=4 --heads=16 --head_dim=128 --seq_lens=4096 \
      --warmup=0 --repeats=1 > "$out/ncu-$kernel.log" 2>&1
    echo "$kernel: ncu exit $?"
    grep -E 'Duration|Pipe|Issue Slots|Executed Ipc|DRAM Throughput|Registers Per|Achieved Occupancy' \
      "$out/ncu-$kernel.log" | head -20
  done
  # Issue 23's widest gap (GQA T2048 causal, 0.95x): our WS kernel beside cuDNN's own kernel
  # (cuDNN 9 names its attention kernels ...sdpa...), tensor pipe and stall reasons of each.
  echo "== ncu: GQA B4 T=S=2048 N32 K8 H128 bf16 causal, fused (WS) then our cudnn"
  for backend in fused cudnn; do
    timeout 120 $g/run "$ncu" --clock-control none -k 'regex:Fused|sdpa|fmha' -c 1 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
      attn-bench --backend=$backend --dtypes=bfloat16 --batch=4 --heads=32 --kv_heads=8 \
      --head_dim=128 --seq_lens=2048 --causal --warmup=0 --repeats=1 > "$out/ncu-gqa-$backend.log" 2>&1
    echo "$backend: ncu exit $?"
    grep -E '^  [A-Za-z_].*\(|Duration|Pipe|Issue Slots|Warp Cycles Per Issued|Stall|Registers Per' \
      "$out/ncu-gqa-$backend.log" | head -24
  done
  # The ladder's before/after: each bundled H = 128 WS variant (bin/attn-bench-ws-<name>, not
  # ws-h<H>-*) on both shapes, the same sections as main's WS kernel above.
  for bin in "$g"/bin/attn-bench-ws-*; do
    v=${bin##*/attn-bench-}
    [[ $v =~ ^ws-h[0-9]+ ]] && continue
    for shape in "--heads=16 --seq_lens=4096" "--heads=32 --kv_heads=8 --seq_lens=2048 --causal"; do
      tag=$([[ $shape == *causal ]] && echo gqa || echo t4096)
      ATTN_FUSED_KERNEL=wgmma_ws timeout 90 $g/run "$ncu" --clock-control none -k regex:Fused -c 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        "${bin##*/}" --backend=fused --dtypes=bfloat16 --batch=4 --head_dim=128 $shape \
        --warmup=0 --repeats=1 > "$out/ncu-$v-$tag.log" 2>&1
      echo "$v ($shape): ncu exit $?"
      grep -E 'Duration|Pipe|Issue Slots|Warp Cycles Per Issued' "$out/ncu-$v-$tag.log" | head -12
    done
  done
fi
