#!/usr/bin/env bash
# cudnn vs PyTorch's SDPA (cuDNN backend) on issue 3's shapes, with peers.py's protocol for both
# (10 warm-ups, median of 50 event-timed calls) and interleaved: ours, torch, ours autotuned,
# torch, ours. Long sustained runs heat the card and lower its clocks, so equal protocols and
# interleaving matter more than repeat counts. Logs under $OUT.
set -uo pipefail
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
shapes=(
  "--batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192 --causal"
  "--batch=4 --heads=16 --head_dim=128 --seq_lens=4096,8192"
  "--batch=4 --heads=32 --kv_heads=32 --head_dim=128 --seq_lens=2048 --causal"
  "--batch=4 --heads=32 --kv_heads=8 --head_dim=128 --seq_lens=2048 --causal"
  "--batch=4 --heads=32 --kv_heads=1 --head_dim=128 --seq_lens=2048 --causal"
)
ours() {
  for s in "${shapes[@]}"; do
    .gpu/run attn-bench --backend=cudnn --dtypes=bfloat16 --warmup=10 --repeats=50 $1 $s
  done 2>&1 | grep '^cudnn'
}
torch() {
  PYTHONUNBUFFERED=1 timeout 200 python3 .gpu/peers.py --suite large --suite gqa --impl torch_cudnn 2>&1 | grep '^torch'
}
{ echo "# round 1 ours"; ours ""; echo "# round 1 torch"; torch
  echo "# round 2 ours autotune"; ours "--autotune"; echo "# round 2 torch"; torch
  echo "# round 3 ours"; ours ""; } | tee "$out/parity.log"
