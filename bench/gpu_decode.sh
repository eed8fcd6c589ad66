#!/usr/bin/env bash
# One device call for decode (issue 24): the fused tests (every tensor-core kernel, split-KV
# forced on every shape too), compute-sanitizer on small split-KV problems, then decode shapes
# (N32 K8 H128 bf16) on our fused kernels beside our cudnn and PyTorch SDPA's flash and cuDNN
# backends, and the judged prefill shapes (the kernels' shared pieces changed). Logs under $OUT.
#   bash bench/gpu_decode.sh [tests] [sanitize] [bench] [stages] [promotion] [ragged] [variants] [prefill] [ncu]
#   (default: tests sanitize bench ragged prefill)
# carry: .gpu (../shared/gpu/bundle .gpu build/tests/attn_engine_tests build/engine/attn-bench)
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
g=${ATTN_GPU_BUNDLE:-.gpu}
mkdir -p "$out"
steps=${*:-tests sanitize bench ragged prefill}
has() { [[ " $steps " == *" $1 "* ]]; }
source "$(dirname "$0")/gpu_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv

if has tests; then
  echo "== fused, registry, kv_lens, naive, cudnn, pieces and runner tests"
  # ATTN_TEST_FILTER='*' runs every engine test.
  timeout 450 stdbuf -oL -eL $g/run attn_engine_tests \
    --gtest_filter="${ATTN_TEST_FILTER:-*Fused*:Registry*:*KvLens*:*Naive*:*Cudnn*:*GpuPieces*:*RunBenchmarkGpu*}" \
    --gtest_brief=1 \
    > "$out/tests.log" 2>&1
  echo "exit code $?"
  grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$out/tests.log"
  grep -B2 -A8 'Failure' "$out/tests.log" | head -60
fi

if has sanitize; then
  echo "== compute-sanitizer on small problems (split-KV forced among the paths)"
  gpu_sanitize '*FusedVersusReference*B2_T17_S17*:*FusedVersusReference*B2_T2_S700*:*FusedVersusReference*B1_T127_S33*:FusedBackend.PicksSplitKv*' \
    150 memcheck racecheck synccheck
fi

# Ours with the peers' protocol (10 warm-ups, median of 50 event-timed calls). $1: the kernel
# (ATTN_FUSED_KERNEL; "auto" leaves the choice to the backend: split-KV for these shapes); $2 the
# backend (fused); $3 the bundled program (attn-bench, or a variant's attn-bench-<variant>).
decode() {
  local kernel=$1 backend=${2:-fused} bin=${3:-attn-bench}
  for shape in "16 1 8192" "1 1 32768" "16 16 8192" "4 1 8192" "64 1 4096" "1 1 4096"; do
    read -r b t s <<< "$shape"
    env ${kernel:+ATTN_FUSED_KERNEL=$kernel} $g/run "$bin" --backend=$backend --dtypes=bfloat16 \
      --warmup=10 --repeats=50 --arena_mib=32768 --batch=$b --heads=32 --kv_heads=8 --head_dim=128 \
      --seq_lens=$t --kv_len=$s 2>&1 | grep -E "^$backend" | sed "s/^/[${kernel:-auto}] B=$b T=$t S=$s /"
  done
}
if has bench; then
  echo "== decode, N32 K8 H128 bf16: fused auto (split-KV), fused wgmma / mma_sync (the kernels of before), cudnn"
  { decode ""; decode wgmma; decode mma_sync; decode "" cudnn; } 2>&1 | tee "$out/decode.log"
  echo "== peers (PyTorch SDPA flash and cuDNN)"
  PYTHONUNBUFFERED=1 timeout 200 python3 $g/peers.py --shape 16,1,8192,32,8,128 --shape 1,1,32768,32,8,128 \
    --shape 16,16,8192,32,8,128 --shape 4,1,8192,32,8,128 --shape 64,1,4096,32,8,128 --shape 1,1,4096,32,8,128 \
    --impl torch_flash,torch_cudnn 2>&1 | grep -v Warn | tee "$out/decode_peers.log"
  echo "== ours again (drift)"
  decode "" 2>&1 | tee -a "$out/decode.log"
fi

if has stages; then
  # The TMA path's K/V stage depth forced (ATTN_SPLIT_KV_STAGES, split_kv_plan.h), beside the
  # automatic plan (2 or 3): whether the H200 needs more bytes in flight a block than the H100,
  # where 2-6 stages made no difference (fused NOTES, issue 24).
  echo "== decode at forced stage depths (automatic first)"
  { decode ""; for n in 2 3 4 5 6; do ATTN_SPLIT_KV_STAGES=$n decode "" | sed "s/^/[stages=$n] /"; done
    decode ""; } 2>&1 | tee "$out/stages.log"
fi

if has promotion; then
  # The TMA copies' L2 promotion (ATTN_TMA_L2_PROMOTION, cuda/tensor_map.cc): 128 bytes (the
  # default) beside 256 (the default before 2026-12-07, which read 25% more L2 sectors), then
  # issue 23's judged H = 128 shapes, whose warp-specialised kernel loads through the same maps.
  echo "== TMA L2 promotion: 128 (default) and 256, twice each"
  for pr in 128 256 128 256; do
    ATTN_TMA_L2_PROMOTION=$pr decode "" | sed "s/^/[promotion=$pr] /"
    ATTN_TMA_L2_PROMOTION=$pr gpu_judged attn-bench "" fused "promotion=$pr"
  done 2>&1 | tee "$out/promotion.log"
fi

if has ragged; then
  echo "== ragged batches (kv_lens): our cudnn and fused beside PyTorch SDPA and JAX with the same mask"
  dec=$(seq -s, 512 512 8192)  # B16: 512, 1024, ..., 8192
  pre=1024,2048,3072,4096
  {
    $g/run attn-bench --backend=cudnn,fused --dtypes=bfloat16 --warmup=10 --repeats=50 --arena_mib=32768 --batch=16 \
      --heads=32 --kv_heads=8 --head_dim=128 --seq_lens=1 --kv_len=8192 --kv_lens=$dec 2>&1 | grep -E '^(cudnn|fused)'
    for c in "" --causal; do
      $g/run attn-bench --backend=cudnn,fused --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=16 \
        --head_dim=128 --seq_lens=4096 --kv_lens=$pre $c 2>&1 | grep -E '^(cudnn|fused)'
    done
  } | tee "$out/ragged.log"
  for shape in 16,1,8192,32,8,128:$dec 4,4096,4096,16,16,128:$pre 4,4096,4096,16,16,128,causal:$pre; do
    PYTHONUNBUFFERED=1 timeout 120 python3 bench/ragged_peers.py --shape ${shape%%:*} --kv-lens ${shape#*:} 2>&1 \
      | grep -v Warn | tee -a "$out/ragged.log"
  done
  echo "== the large suite's decode sections (attn-bench --suite=large)"
  timeout 200 $g/run attn-bench --suite=large --sections='decode,decode ragged' --arena_mib=20000 2>&1 \
    | tee "$out/suite_decode.log" | tail -60
fi

if has variants; then
  # Each bundled bin/attn-bench-<variant> beside this build's attn-bench ("main"), two interleaved
  # rounds, as the H100's clocks drift within a call (PERF.md 2026-12-07: 10-20% at T8192).
  echo "== variants (bundled as bin/attn-bench-<variant>) beside main: decode shapes, then the prefill judged shapes"
  for round in 1 2; do
    for bin in $g/bin/attn-bench $g/bin/attn-bench-*; do
      [ -e "$bin" ] || continue
      name=${bin##*/}; v=${name#attn-bench-}; [ "$name" != attn-bench ] || v=main
      decode "" fused "$name" | sed "s/^/$v r$round /"
      gpu_judged "$name" "" fused "$v r$round"
    done
  done 2>&1 | tee "$out/variants.log"
fi

if has prefill; then
  echo "== prefill (issue 23's judged shapes): fused and cudnn, bf16; then PyTorch SDPA beside"
  {
    for c in --causal ""; do
      for h in 128 96 256; do
        $g/run attn-bench --backend=fused,cudnn --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=16 \
          --head_dim=$h --seq_lens=4096,8192 $c 2>&1 | grep -E '^(fused|cudnn)'
      done
    done
    for k in 32 8 1; do
      $g/run attn-bench --backend=fused,cudnn --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=32 \
        --kv_heads=$k --head_dim=128 --seq_lens=2048 --causal 2>&1 | grep -E '^(fused|cudnn)'
    done
    $g/run attn-bench --backend=fused --dtypes=bfloat16 --warmup=10 --repeats=50 --batch=4 --heads=8 \
      --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal 2>&1 | grep -E '^fused'
  } | tee "$out/prefill.log"
  shapes=()
  for c in ",causal" ""; do
    for h in 128 96 256; do shapes+=(--shape 4,4096,4096,16,16,$h$c --shape 4,8192,8192,16,16,$h$c); done
  done
  for k in 32 8 1; do shapes+=(--shape 4,2048,2048,32,$k,128,causal); done
  PYTHONUNBUFFERED=1 timeout 240 python3 $g/peers.py "${shapes[@]}" --impl torch_flash,torch_cudnn 2>&1 | grep -v Warn \
    | tee -a "$out/prefill.log"
fi

if has ncu; then
  echo "== ncu: the split-KV kernel at B16 T1 S8192 and B1 T1 S32768 (N32 K8 H128 bf16)"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  for shape in "16 8192" "1 32768"; do
    read -r b s <<< "$shape"
    timeout 90 $g/run "$ncu" --clock-control none -k regex:SplitKv -c 2 --section SpeedOfLight \
      --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
      attn-bench --backend=fused --dtypes=bfloat16 --batch=$b --heads=32 --kv_heads=8 --head_dim=128 \
      --seq_lens=1 --kv_len=$s --warmup=0 --repeats=1 > "$out/ncu_$b.log" 2>&1
    echo "-- B=$b S=$s: ncu exit $?"
    grep -E 'SplitKv|Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Stall|Issue Slots|Grid Size|Block Limit|Waves' "$out/ncu_$b.log" | head -40
  done
fi
