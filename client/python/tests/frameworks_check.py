#!/usr/bin/env python3
"""Arrays from the frameworks a notebook holds, through attn_client.attend: JAX (bfloat16,
float32), PyTorch (bfloat16 on the GPU, float32 that tracks gradients), each against the
float64 reference. CI has neither framework; gpu_notebook.sh runs this on the GPU machine,
which has both: ATTN_TARGET=host:port python3 client/python/tests/frameworks_check.py
"""
import sys

import numpy as np

import attn_client

client = attn_client.Client()
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal(s, dtype=np.float32) for s in ((2, 64, 8, 64), (2, 64, 2, 64), (2, 64, 2, 64)))
failed = 0


def run(name, factory, want_dtype):
    global failed
    try:
        make = factory()
        qq, kk, vv = (make(x) for x in (q, k, v))
        out = client.attend(qq, kk, vv, causal=True)
        result = attn_client.check(out, *(attn_client.arrays.to_numpy(x, "x") for x in (qq, kk, vv)), causal=True)
        ok = result.close and out.dtype.name == want_dtype
        print(f"{'ok  ' if ok else 'FAIL'} {name}: out {out.dtype} {out.shape}, max |err| {result.max_abs_error:.2e}")
        failed += not ok
    except ImportError as e:
        print(f"skip {name}: {e}")


def jax_array(dtype):
    import jax.numpy as jnp

    return lambda x: jnp.asarray(x, dtype=dtype)


def torch_tensor(dtype, device, grad=False):
    import torch

    return lambda x: torch.tensor(x, dtype=getattr(torch, dtype), device=device, requires_grad=grad)


run("jax bfloat16", lambda: jax_array("bfloat16"), "bfloat16")
run("jax float32", lambda: jax_array("float32"), "float32")
run("torch bfloat16 on cuda", lambda: torch_tensor("bfloat16", "cuda"), "bfloat16")
run("torch float32 requires_grad on cuda", lambda: torch_tensor("float32", "cuda", grad=True), "float32")
run("torch float16 on cpu", lambda: torch_tensor("float16", "cpu"), "float16")
sys.exit(1 if failed else 0)
