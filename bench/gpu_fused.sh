#!/usr/bin/env bash
# One device call for the fused backend (issue 7): its GPU tests, compute-sanitizer memcheck and
# racecheck on small problems, then ours beside PyTorch's SDPA flash backend (FlashAttention-2)
# and cuDNN on the judged shapes, interleaved ours / peers / ours. Logs under $OUT (at most 8
# files come back: summary, tests (two), memcheck, racecheck, ours, peers, variants; ncu prints).
#   bash bench/gpu_fused.sh [tests] [sanitize] [bench] [variants] [ncu]   (default: the first three)
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
g=${ATTN_GPU_BUNDLE:-.gpu}  # the bundle made by ../shared/gpu/bundle
mkdir -p "$out"
steps=${*:-tests sanitize bench}
has() { [[ " $steps " == *" $1 "* ]]; }
source "$(dirname "$0")/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv

if has tests; then
  echo "== fused tests (and the registry's); bin/attn_engine_tests-<variant> test a variant's build"
  gpu_tests '*Fused*:Registry*' 300
fi

if has sanitize; then
  echo "== compute-sanitizer on small fused problems (every head dim, each dtype, causal)"
  gpu_sanitize '*FusedVersusReference*B2_T17_S17*:*FusedVersusReference*B1_T127_S33*:*FusedVersusReference*B2_T64_S256*:FusedBackend.ReadsStridedKv*' \
    120 memcheck racecheck
fi

# Ours with the peers' protocol (10 warm-ups, median of 50 event-timed calls). $1: the kernel
# (ATTN_FUSED_KERNEL: wgmma is the automatic choice on H100/H200, mma_sync the sm_80 kernel).
ours() {
  b() { ATTN_FUSED_KERNEL=$1 $g/run attn-bench --backend=fused --dtypes=bfloat16 --warmup=10 --repeats=50 "${@:2}" \
    | sed "s/^fused /fused[$1] /"; }
  b $1 --batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192 --causal
  b $1 --batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192
  b $1 --batch=4 --heads=8 --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal
}
if has bench; then
  echo "== ours (fused, bf16): the wgmma kernel, then the mma.sync kernel"
  { ours wgmma; ours mma_sync; } 2>&1 | grep -vE '^\* GB|^device' | tee "$out/ours.log"
  echo "== ours, other dtypes and head dims (B=4 T=S=4096 N=16 causal; fp32 at T=1024)"
  {
    $g/run attn-bench --backend=fused --dtypes=float16 --batch=4 --heads=16 --head_dim=128 --seq_lens=4096 --causal
    for h in 32 64 96 256; do
      $g/run attn-bench --backend=fused --dtypes=bfloat16 --batch=4 --heads=16 --head_dim=$h --seq_lens=4096 --causal
    done
    $g/run attn-bench --backend=fused,naive --dtypes=float32 --batch=4 --heads=8 --head_dim=64 --seq_lens=1024
    $g/run attn-bench --backend=fused --dtypes=bfloat16 --batch=4 --heads=32 --kv_heads=1 --head_dim=128 --seq_lens=2048 --causal
  } 2>&1 | grep -vE '^\* GB|^device|^backend' | tee -a "$out/ours.log"
  echo "== cuDNN (ours, heuristic plan) on the codelab shapes"
  $g/run attn-bench --backend=cudnn --dtypes=bfloat16 --warmup=20 --repeats=100 --batch=4 --heads=8 \
    --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal 2>&1 | grep -vE '^\* GB|^device' | tee -a "$out/ours.log"
  echo "== peers: PyTorch SDPA flash (FlashAttention-2) and cuDNN backends"
  PYTHONUNBUFFERED=1 timeout 200 python3 $g/peers.py --suite large --impl torch_flash,torch_cudnn 2>&1 | grep -v Warn | tee "$out/peers.log"
  PYTHONUNBUFFERED=1 timeout 120 python3 $g/peers.py --shape 4,128,128,8,8,64,causal --shape 4,256,256,8,8,64,causal \
    --shape 4,512,512,8,8,64,causal --shape 4,1024,1024,8,8,64,causal --shape 4,2048,2048,8,8,64,causal \
    --impl torch_flash,torch_cudnn 2>&1 | grep -v Warn | tee -a "$out/peers.log"
  echo "== ours again (interleaved for drift)"
  { ours wgmma; ours mma_sync; } 2>&1 | grep -vE '^\* GB|^device|^backend' | tee -a "$out/ours.log"
fi

if has variants; then
  echo "== kernel variants side by side (bundled as bin/attn-bench-<variant>), judged shapes, bf16"
  for bin in $g/bin/attn-bench-*; do
    v=${bin##*/attn-bench-}
    kernel=wgmma  # variants named mma-* are of the mma.sync kernel
    [[ $v == mma-* ]] && kernel=mma_sync
    for c in --causal ""; do
      ATTN_FUSED_KERNEL=$kernel $g/run attn-bench-$v --backend=fused --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=16 \
        --head_dim=128 --seq_lens=4096,8192 $c 2>&1 | grep -E '^fused' | sed "s/^/$v /"
    done
    ATTN_FUSED_KERNEL=$kernel $g/run attn-bench-$v --backend=fused --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=8 \
      --head_dim=64 --seq_lens=512,2048 --causal 2>&1 | grep -E '^fused' | sed "s/^/$v /"
  done 2>&1 | tee "$out/variants.log"
fi

if has ncu; then
  echo "== ncu: one fused call, B=4 T=S=4096 N=16 H=128 bf16 non-causal"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  timeout 90 $g/run "$ncu" --clock-control none -k regex:Fused -c 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section Occupancy --section WarpStateStats attn-bench --backend=fused --dtypes=bfloat16 \
    --batch=4 --heads=16 --head_dim=128 --seq_lens=4096 --warmup=0 --repeats=1 > /tmp/ncu.log 2>&1
  echo "ncu exit $?"
  grep -E 'Duration|Throughput|Pipe|Registers|Achieved Occupancy|Theoretical Occupancy|Stall|Bank|Issue Slots|Executed Ipc' /tmp/ncu.log | head -60
fi
