#!/usr/bin/env python3
"""Peers of our `naive` backend on the GPU machine: the codelab's naive cell in JAX (jit, host
wall clock around block_until_ready, as the codelab times it) and the same three ops in eager
PyTorch (matmul, softmax, matmul; CUDA events around each call, as attn-bench times ours).

  naive_peers.py [--shape B,T,N,H] [--dtypes float32,bfloat16] [--causal] [--repeats 100]
"""
import argparse, math, statistics, time


def jax_naive(shape, dtype, causal, repeats, precision=None):
    import jax, jax.numpy as jnp
    B, T, N, H = shape
    dt = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}[dtype]
    r = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(x, (B, T, N, H), dt) for x in r)

    @jax.jit
    def naive_attention(q, k, v):  # the codelab's cell, plus an optional causal mask
        scale = 1.0 / math.sqrt(q.shape[-1])
        q_t, k_t, v_t = (jnp.transpose(x, (0, 2, 1, 3)) for x in (q, k, v))
        scores = jnp.matmul(q_t, jnp.transpose(k_t, (0, 1, 3, 2)), precision=precision) * scale
        if causal:
            mask = jnp.tril(jnp.ones((T, T), bool))
            scores = jnp.where(mask, scores, -jnp.inf)
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.transpose(jnp.matmul(weights, v_t, precision=precision), (0, 2, 1, 3))

    for _ in range(10):
        jax.block_until_ready(naive_attention(q, k, v))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(naive_attention(q, k, v))
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def torch_naive(shape, dtype, causal, repeats):
    import torch
    B, T, N, H = shape
    dt = {"float32": torch.float32, "bfloat16": torch.bfloat16}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = False  # true fp32 GEMMs, as ours
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(B, T, N, H, device="cuda", dtype=dt, generator=g).transpose(1, 2)
               for _ in range(3))
    mask = torch.ones(T, T, device="cuda", dtype=torch.bool).tril() if causal else None

    def fn():
        s = torch.matmul(q, k.transpose(-1, -2)).float() * (1.0 / math.sqrt(H))
        if mask is not None:
            s = s.masked_fill(~mask, float("-inf"))
        p = torch.softmax(s, dim=-1).to(dt)
        return torch.matmul(p, v).transpose(1, 2).contiguous()

    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
          for _ in range(repeats)]
    for a, b in ev:
        a.record(); fn(); b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="4,1024,8,64")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--repeats", type=int, default=100)
    a = ap.parse_args()
    shape = tuple(int(x) for x in a.shape.split(","))
    B, T, N, H = shape
    flops = 4.0 * B * N * T * T * H * (0.5 if a.causal else 1.0)
    print(f"{'peer':<24} {'shape':<16} {'dtype':<9} {'causal':<6} {'median ms':>10} {'TFLOP/s':>8}")
    for dtype in a.dtypes.split(","):
        peers = [("jax naive (host clock)", jax_naive), ("torch eager (events)", torch_naive)]
        if dtype == "float32":  # JAX's default float32 matmul precision on GPU is TF32; ours is full fp32
            peers.insert(1, ("jax naive fp32 HIGHEST", lambda *a: jax_naive(*a, precision="highest")))
        for name, fn in peers:
            try:
                ms = fn(shape, dtype, a.causal, a.repeats)
                print(f"{name:<24} {a.shape:<16} {dtype:<9} {str(a.causal):<6} {ms:>10.4f} {flops / ms / 1e9:>8.2f}")
            except Exception as e:  # a missing framework must not hide the other peer
                print(f"{name:<24} {a.shape:<16} {dtype:<9} {str(a.causal):<6} failed: {e}")


if __name__ == "__main__":
    main()
