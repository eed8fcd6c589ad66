"""The optional float64 check: the only attention arithmetic in attn_client.

Everything else (every backend, every timing, the benchmark's own numerics) runs on the server;
this exists so a notebook can hold a returned array against the formula itself, as the
codelab's naive cell does, without trusting the service that produced it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from attn_client.arrays import dtype_name, to_numpy

# The codelab's closeness checks: atol 1e-3 for float32, atol = rtol = 1e-2 for 16-bit inputs.
TOLERANCES = {"float32": (1e-3, 0.0), "bfloat16": (1e-2, 1e-2), "float16": (1e-2, 1e-2)}


def reference(q, k, v, *, causal: bool = False, scale: float | None = None, kv_lens=None) -> np.ndarray:
    """softmax(Q Kᵀ · scale) V in float64, BTNH in and out; K < N is GQA/MQA (query head n reads
    KV head n // (N / K)); causal is top-left aligned (query t sees keys s <= t); with kv_lens,
    batch element b sees its first kv_lens[b] keys only."""
    q, k, v = (to_numpy(x, name).astype(np.float64) for x, name in ((q, "q"), (k, "k"), (v, "v")))
    n, kv = q.shape[2], k.shape[2]
    group = n // kv
    k = np.repeat(k, group, axis=2)
    v = np.repeat(v, group, axis=2)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = np.einsum("btnh,bsnh->bnts", q, k) * scale
    t, s = scores.shape[-2:]
    if causal:
        scores = np.where(np.tril(np.ones((t, s), dtype=bool)), scores, -np.inf)
    if kv_lens is not None:
        visible = np.arange(s)[None, :] < np.asarray(kv_lens).reshape(-1, 1)  # (B, S)
        scores = np.where(visible[:, None, None, :], scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    return np.einsum("bnts,bsnh->btnh", weights, v)


@dataclass
class Check:
    """An output held against the float64 reference with the codelab's tolerance."""

    max_abs_error: float
    rel_l2_error: float
    atol: float
    rtol: float
    close: bool


def check(out, q, k, v, *, causal: bool = False, scale: float | None = None, kv_lens=None) -> Check:
    """Compares `out` with reference(q, k, v); tolerances follow out's dtype."""
    out = to_numpy(out, "out")
    ref = reference(q, k, v, causal=causal, scale=scale, kv_lens=kv_lens)
    got = out.astype(np.float64)
    diff = np.abs(got - ref)
    atol, rtol = TOLERANCES[dtype_name(out.dtype)]
    norm = float(np.linalg.norm(ref))
    return Check(max_abs_error=float(diff.max()),
                 rel_l2_error=float(np.linalg.norm(got - ref) / norm) if norm else 0.0,
                 atol=atol, rtol=rtol, close=bool(np.allclose(got, ref, atol=atol, rtol=rtol)))
