#!/usr/bin/env python3
"""Times the peers on ragged batches (per-sequence KV lengths) on the GPU machine, for issue 24.

  python3 bench/ragged_peers.py --shape B,T,S,N,K,H[,causal] --kv-lens L1,L2,... [--impl ...]

Batch element b attends to its first L_b keys (causal: top-left, query t sees keys <= t), as
attn's kv_lens. The peers, each with that same mask:
  torch_cudnn, torch_efficient, torch_math: PyTorch SDPA with a boolean attn_mask (B, 1, 1, S)
    (or (B, 1, T, S) causal) on that backend; a backend that refuses the mask is reported so;
  jax_cudnn: jax.nn.dot_product_attention(implementation="cudnn", key_value_seq_lengths=...).
Timing as ../shared/gpu/peers.py: bf16 normal(0, 1) inputs, 10 warm-ups, median of 50 calls
bracketed by CUDA events (PyTorch) or by host wall clock around a jitted call plus
block_until_ready (JAX). FLOPs count only the visible keys (4 * N * H * sum of visible keys).
"""
import argparse
import statistics
import sys
import time


def parse_shape(text):
    parts = text.split(",")
    b, t, s, n, k, h = (int(x) for x in parts[:6])
    return b, t, s, n, k, h, len(parts) > 6 and parts[6] == "causal"


def visible_keys(lens, t, causal):
    total = 0
    for length in lens:
        for q in range(t):
            total += min(length, q + 1) if causal else length
    return total


def time_torch(impl, shape, lens):
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b, t, s, n, k, h, causal = shape
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, n, t, h, device="cuda", dtype=torch.bfloat16, generator=g)
    kk = torch.randn(b, k, s, h, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(b, k, s, h, device="cuda", dtype=torch.bfloat16, generator=g)
    if k != n:  # SDPA's enable_gqa is not on every backend: expand K/V heads as a view
        kk = kk.repeat_interleave(n // k, dim=1)
        v = v.repeat_interleave(n // k, dim=1)
    keys = torch.arange(s, device="cuda")
    lengths = torch.tensor(lens, device="cuda")
    mask = keys[None, :] < lengths[:, None]  # (B, S)
    if causal:
        rows = torch.arange(t, device="cuda")
        mask = mask[:, None, :] & (keys[None, None, :] <= rows[None, :, None])  # (B, T, S)
        mask = mask[:, None, :, :]
    else:
        mask = mask[:, None, None, :]
    backend = {"torch_cudnn": SDPBackend.CUDNN_ATTENTION,
               "torch_efficient": SDPBackend.EFFICIENT_ATTENTION,
               "torch_math": SDPBackend.MATH}[impl]
    f = torch.nn.functional.scaled_dot_product_attention
    with sdpa_kernel([backend]):
        for _ in range(10):
            f(q, kk, v, attn_mask=mask)
        torch.cuda.synchronize()
        ms = []
        for _ in range(50):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f(q, kk, v, attn_mask=mask)
            stop.record()
            stop.synchronize()
            ms.append(start.elapsed_time(stop))
    return statistics.median(ms)


def time_jax(shape, lens):
    import jax
    import jax.numpy as jnp

    b, t, s, n, k, h, causal = shape
    key = jax.random.PRNGKey(0)
    kq, kk, kv = jax.random.split(key, 3)
    q = jax.random.normal(kq, (b, t, n, h), dtype=jnp.bfloat16)
    kk = jax.random.normal(kk, (b, s, k, h), dtype=jnp.bfloat16)
    v = jax.random.normal(kv, (b, s, k, h), dtype=jnp.bfloat16)
    lengths = jnp.asarray(lens, dtype=jnp.int32)
    f = jax.jit(lambda q, k, v, l: jax.nn.dot_product_attention(
        q, k, v, is_causal=causal, key_value_seq_lengths=l, implementation="cudnn"))
    for _ in range(10):
        f(q, kk, v, lengths).block_until_ready()
    ms = []
    for _ in range(50):
        t0 = time.perf_counter()
        f(q, kk, v, lengths).block_until_ready()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", required=True, help="B,T,S,N,K,H[,causal]")
    ap.add_argument("--kv-lens", required=True, help="comma list of B lengths, each 1..S")
    ap.add_argument("--impl", default="torch_cudnn,torch_efficient,jax_cudnn")
    args = ap.parse_args()
    shape = parse_shape(args.shape)
    lens = [int(x) for x in args.kv_lens.split(",")]
    if len(lens) != shape[0] or not all(1 <= x <= shape[2] for x in lens):
        sys.exit(f"--kv-lens needs B = {shape[0]} lengths in 1..S = {shape[2]}; got {len(lens)}")
    b, t, s, n, k, h, causal = shape
    flops = 4.0 * n * h * visible_keys(lens, t, causal)
    print(f"{'impl':<16} {'shape':<28} {'median ms':>10} {'TFLOP/s':>8}")
    for impl in args.impl.split(","):
        try:
            ms = time_jax(shape, lens) if impl == "jax_cudnn" else time_torch(impl, shape, lens)
            print(f"{impl:<16} {args.shape:<28} {ms:10.4f} {flops / ms / 1e9:8.1f}")
        except Exception as e:  # a backend that refuses the mask says so, the others still run
            print(f"{impl:<16} {args.shape:<28} refused: {str(e).splitlines()[0][:100]}")


if __name__ == "__main__":
    main()
