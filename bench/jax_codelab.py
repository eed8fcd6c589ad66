#!/usr/bin/env python3
"""The codelab notebook's sweeps in JAX, as its cells run them (jit per shape, warm-up 2,
median of 20 host-timed calls): sequence sweep (naive, XLA f32, XLA bf16, cuDNN bf16; T 64..1024),
batch sweep (XLA f32/bf16, cuDNN bf16; B 1..16), MHA/GQA/MQA, causal sweep (XLA/cuDNN bf16;
T 128..2048). Prints each section's wall time, compiles included, to set beside
`attn-bench --suite=codelab`."""
import math, statistics, sys, time

import jax
import jax.numpy as jnp


def naive_attention(q, k, v):
    scale = 1.0 / math.sqrt(q.shape[-1])
    q_t, k_t, v_t = (jnp.transpose(x, (0, 2, 1, 3)) for x in (q, k, v))
    scores = jnp.matmul(q_t, jnp.transpose(k_t, (0, 1, 3, 2))) * scale
    return jnp.transpose(jnp.matmul(jax.nn.softmax(scores, axis=-1), v_t), (0, 2, 1, 3))


def bench(fn, *args, warmup=2, repeats=20):
    f = jax.jit(fn)
    for _ in range(warmup):
        jax.block_until_ready(f(*args))
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def inputs(b, t, n, h, k=None):
    r = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(r[0], (b, t, n, h), jnp.float32)
    kk = jax.random.normal(r[1], (b, t, k or n, h), jnp.float32)
    v = jax.random.normal(r[2], (b, t, k or n, h), jnp.float32)
    return (q, kk, v), tuple(x.astype(jnp.bfloat16) for x in (q, kk, v))


def sdpa(impl, causal=False):
    return lambda q, k, v: jax.nn.dot_product_attention(q, k, v, implementation=impl, is_causal=causal)


def main():
    total = time.perf_counter()
    sections = []
    t0 = time.perf_counter()
    for t in (64, 128, 256, 512, 1024):
        f32, bf16 = inputs(4, t, 8, 64)
        row = [bench(naive_attention, *f32), bench(sdpa("xla"), *f32), bench(sdpa("xla"), *bf16),
               bench(sdpa("cudnn"), *bf16)]
        print(f"sequence T={t}: naive {row[0]:.3f}  xla f32 {row[1]:.3f}  xla bf16 {row[2]:.3f}  cudnn bf16 {row[3]:.3f} ms")
    sections.append(("sequence sweep", time.perf_counter() - t0))
    t0 = time.perf_counter()
    for b in (1, 2, 4, 8, 16):
        f32, bf16 = inputs(b, 256, 8, 64)
        row = [bench(sdpa("xla"), *f32), bench(sdpa("xla"), *bf16), bench(sdpa("cudnn"), *bf16)]
        print(f"batch B={b}: xla f32 {row[0]:.3f}  xla bf16 {row[1]:.3f}  cudnn bf16 {row[2]:.3f} ms")
    sections.append(("batch sweep", time.perf_counter() - t0))
    t0 = time.perf_counter()
    for k in (8, 2, 1):
        _, bf16 = inputs(2, 64, 8, 64, k)
        print(f"MHA/GQA/MQA K={k}: xla bf16 {bench(sdpa('xla'), *bf16):.3f} ms")
    sections.append(("MHA/GQA/MQA", time.perf_counter() - t0))
    t0 = time.perf_counter()
    for t in (128, 256, 512, 1024, 2048):
        _, bf16 = inputs(4, t, 8, 64)
        row = [bench(sdpa("xla", True), *bf16), bench(sdpa("cudnn", True), *bf16)]
        print(f"causal T={t}: xla bf16 {row[0]:.3f}  cudnn bf16 {row[1]:.3f} ms")
    sections.append(("causal sweep", time.perf_counter() - t0))
    for name, s in sections:
        print(f"wall {name}: {s:.2f} s")
    print(f"wall total (JAX notebook's cells, compiles included): {time.perf_counter() - total:.2f} s")


if __name__ == "__main__":
    sys.exit(main())
