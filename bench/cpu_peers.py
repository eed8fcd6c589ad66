#!/usr/bin/env python3
"""attn's cpu backend beside JAX's XLA attention on the CPU, on the same cores and shapes.

Runs with bench/cpu_peers.sh, which makes the venv (jax[cpu], pinned) and holds the build lock.
Per round, every shape on `attn-bench --device=-1 --backend=cpu` (one process per shape, its
median of --repeats calls after --warmup), then every shape in JAX in this process
(`jax.nn.dot_product_attention(implementation="xla")`, timed as bench/jax_codelab.py times it:
jit, the same warm-up and repeats, host clock around block_until_ready): rounds interleave the two, and each figure printed is the median
over rounds of the per-round medians. Prints one row per shape with the ratio JAX / ours (above 1:
ours is faster)."""
import argparse
import os
import re
import statistics
import subprocess

import jax
import jax.numpy as jnp

from jax_codelab import bench, sdpa  # the codelab's timing: jit, warm-up, median of host-timed calls

# (B, T, S, N, K, H, causal, dtype): the sweep (B4 N8 H64, T 64..1024, causal and not,
# float32 and bfloat16), a GQA shape (Llama-style N32 K8 H128) and a long one (T = S = 4096).
SHAPES = [(4, t, t, 8, 8, 64, causal, dtype)
          for dtype in ("float32", "bfloat16") for causal in (False, True)
          for t in (64, 128, 256, 512, 1024)]
SHAPES += [(1, 1024, 1024, 32, 8, 128, causal, dtype)
           for dtype in ("float32", "bfloat16") for causal in (False, True)]
SHAPES += [(1, 4096, 4096, 8, 8, 64, causal, dtype)
           for dtype in ("float32", "bfloat16") for causal in (False, True)]

MEDIAN = re.compile(r"\s(?:float32|bfloat16|float16)(?:\s+causal)?\s+([0-9.]+)\s")


def name(shape):
    b, t, s, n, k, h, causal, dtype = shape
    return f"B{b} T{t} S{s} N{n} K{k} H{h} {dtype}{' causal' if causal else ''}"


def ours(bench, shape, warmup, repeats):
    b, t, s, n, k, h, causal, dtype = shape
    cmd = [bench, "--device=-1", "--backend=cpu", f"--batch={b}", f"--seq_lens={t}",
           f"--kv_len={s}", f"--heads={n}", f"--kv_heads={k}", f"--head_dim={h}",
           f"--dtypes={dtype}", f"--causal={'true' if causal else 'false'}",
           f"--warmup={warmup}", f"--repeats={repeats}"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("cpu "):
            return float(MEDIAN.search(line).group(1))
    raise RuntimeError(f"no result line from {' '.join(cmd)}:\n{out}")


def jax_ms(shape, warmup, repeats):
    b, t, s, n, k, h, causal, dtype = shape
    keys = jax.random.split(jax.random.key(0), 3)
    dt = jnp.float32 if dtype == "float32" else jnp.bfloat16
    q = jax.random.normal(keys[0], (b, t, n, h), jnp.float32).astype(dt)
    kk = jax.random.normal(keys[1], (b, s, k, h), jnp.float32).astype(dt)
    v = jax.random.normal(keys[2], (b, s, k, h), jnp.float32).astype(dt)
    return bench(sdpa("xla", causal), q, kk, v, warmup=warmup, repeats=repeats)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attn_bench", required=True, help="path to attn-bench")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--filter", default="", help="only shapes whose name contains this")
    args = ap.parse_args()
    shapes = [s for s in SHAPES if args.filter in name(s)]
    print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {os.cpu_count()} CPUs; attn-bench: "
          f"{args.attn_bench}; {args.rounds} rounds of {args.warmup} warm-up + {args.repeats} calls",
          flush=True)
    mine = {name(s): [] for s in shapes}
    peer = {name(s): [] for s in shapes}
    for r in range(args.rounds):
        for s in shapes:
            mine[name(s)].append(ours(args.attn_bench, s, args.warmup, args.repeats))
        for s in shapes:
            peer[name(s)].append(jax_ms(s, args.warmup, args.repeats))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    print(f"{'shape':44s} {'attn cpu ms':>12s} {'JAX xla ms':>12s} {'JAX/ours':>9s}")
    for s in shapes:
        a, j = statistics.median(mine[name(s)]), statistics.median(peer[name(s)])
        print(f"{name(s):44s} {a:12.3f} {j:12.3f} {j / a:8.2f}x")


if __name__ == "__main__":
    main()
