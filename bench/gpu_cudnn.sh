#!/usr/bin/env bash
# One device call for the cudnn backend: all GPU tests, then ours (heuristic and autotuned plans)
# and PyTorch's SDPA on the same shapes, interleaved ours / peers / ours. Logs under $OUT
# (at most 8 files come back: summary, tests, ours, peers).
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
source "$(dirname "$0")/gpu_tests.sh"

ours() {
  local tune=$1
  b() { .gpu/run attn-bench --backend=cudnn --dtypes=bfloat16 --warmup=20 --repeats=100 $tune "$@"; }
  b --batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192 --causal
  b --batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192
  for k in 32 8 1; do b --batch=4 --heads=32 --kv_heads=$k --head_dim=128 --seq_lens=2048 --causal; done
  b --batch=4 --heads=8 --head_dim=64 --seq_lens=128,256,512,1024,2048 --causal
}
echo "== ours, heuristic plan (plan ms = cold graph build for that shape)"
ours "" 2>&1 | grep -vE '^\* GB|^device' | tee "$out/ours.log"
echo "== ours, autotuned (plan ms includes building all plans and timing them)"
ours "--autotune" 2>&1 | grep -vE '^\* GB|^device|^backend' | tee -a "$out/ours.log"
echo "== peers: PyTorch SDPA, cuDNN and flash backends"
PYTHONUNBUFFERED=1 timeout 300 python3 .gpu/peers.py --suite large --suite gqa --impl torch_cudnn,torch_flash 2>&1 | grep -v Warn | tee "$out/peers.log"
PYTHONUNBUFFERED=1 timeout 120 python3 .gpu/peers.py --shape 4,128,128,8,8,64,causal --shape 4,256,256,8,8,64,causal --shape 4,512,512,8,8,64,causal --shape 4,1024,1024,8,8,64,causal --shape 4,2048,2048,8,8,64,causal --impl torch_cudnn 2>&1 | grep -v Warn | tee -a "$out/peers.log"
echo "== ours again, heuristic (interleaved for drift)"
ours "" 2>&1 | grep -vE '^\* GB|^device|^backend' | tee -a "$out/ours.log"
