"""Arrays in and out: numpy, ml_dtypes.bfloat16, and anything with __array__ or DLPack.

The wire carries packed, little-endian BTNH tensors in one of three dtypes; these helpers turn
a caller's array into that and the server's bytes back into a numpy array.
"""
from __future__ import annotations

import sys
from typing import Any

import ml_dtypes
import numpy as np

from attn_client.errors import invalid

# The wire's dtypes: proto enum name -> numpy dtype. The one list of them.
DTYPES = {
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
}


def dtype_name(dtype: Any) -> str:
    """'float32', 'bfloat16' or 'float16' for a name, numpy dtype or framework dtype."""
    if isinstance(dtype, str):
        name = dtype.lower().removeprefix("torch.").removeprefix("jnp.")
    else:
        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = str(dtype).lower().removeprefix("torch.")
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
    name = aliases.get(name, name)
    if name not in DTYPES:
        raise invalid(f"dtype: {dtype!r} is not one the service runs; expected {', '.join(DTYPES)}")
    return name


def to_numpy(x: Any, what: str) -> np.ndarray:
    """A host numpy array with x's values and dtype: numpy arrays as they are, JAX arrays and
    other __array__ objects through numpy (JAX's bfloat16 is ml_dtypes'), DLPack producers
    through np.from_dlpack; a PyTorch tensor that needs it detached and copied to the host."""
    if isinstance(x, np.ndarray):
        return x
    if _is_torch_bfloat16(x):
        # numpy has no bfloat16 of its own, so neither __array__ nor DLPack can hand one over;
        # the same 16 bits, viewed as int16 and back.
        return x.detach().cpu().view(_torch_int16()).numpy().view(ml_dtypes.bfloat16)
    errors = []
    for candidate in _host_candidates(x):
        if hasattr(candidate, "__array__"):
            try:
                return np.asarray(candidate)
            except (TypeError, ValueError, RuntimeError) as e:
                errors.append(f"__array__: {e}")
        if hasattr(candidate, "__dlpack__"):
            try:
                return np.from_dlpack(candidate)
            except (TypeError, ValueError, RuntimeError, BufferError) as e:
                errors.append(f"DLPack: {e}")
    why = "; ".join(errors) or f"a {type(x).__name__} has neither __array__ nor __dlpack__"
    raise invalid(f"{what}: cannot read it as an array ({why})")


def _host_candidates(x: Any):
    """x, then (for a tensor that tracks gradients or lives on an accelerator) its detached host copy."""
    yield x
    if callable(getattr(x, "detach", None)) and callable(getattr(x, "cpu", None)):
        yield x.detach().cpu()


def _is_torch_bfloat16(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and str(getattr(x, "dtype", "")) == "torch.bfloat16"


def _torch_int16() -> Any:
    import torch  # only reached for a torch tensor, so torch is there

    return torch.int16


def to_wire(x: np.ndarray, dtype: str) -> bytes:
    """x rounded to the wire dtype, packed row-major little-endian."""
    packed = np.ascontiguousarray(x.astype(DTYPES[dtype], copy=False))
    return (packed.byteswap() if sys.byteorder == "big" else packed).tobytes()


def from_wire(data: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The server's packed little-endian bytes as a writable array of `shape`."""
    out = np.frombuffer(data, dtype=DTYPES[dtype]).reshape(shape)
    return out.byteswap() if sys.byteorder == "big" else out.copy()
