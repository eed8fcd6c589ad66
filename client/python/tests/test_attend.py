"""Arrays through Attend: every wire dtype against the float64 reference, the awkward shapes,
and the array protocols a notebook hands over (JAX-like __array__, DLPack)."""
import ml_dtypes
import numpy as np
import pytest

import attn_client
from conftest import needs_cuda

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]

# (B, T, S, N, K, H, causal, scale): T = 1, odd T and S, S != T, GQA, MQA, head dims 32..128.
SHAPES = [
    (1, 1, 1, 1, 1, 32, False, None),
    (2, 17, 17, 4, 4, 64, True, None),
    (1, 33, 20, 8, 2, 32, False, 0.5),
    (1, 20, 33, 4, 1, 128, True, None),
]


def inputs(b, t, s, n, k, h, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for shape in ((b, t, n, h), (b, s, k, h), (b, s, k, h)))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}_T{}_S{}_N{}_K{}_H{}_{}".format(*s[:6], "causal" if s[6] else "full"))
def test_round_trip_against_float64_reference(client, dtype, shape):
    *dims, causal, scale = shape
    q, k, v = inputs(*dims, dtype)
    # The server's float64 `reference` backend: the inputs it saw are q, k, v exactly (already in
    # the wire dtype), so the only difference is the output's rounding to that dtype. (The `cpu`
    # backend computes in float32; its accuracy is the engine tests'.)
    out, info = client.attend(q, k, v, causal=causal, scale=scale, backend="reference", return_info=True)
    assert out.dtype == np.dtype(dtype) and out.shape == q.shape
    assert info.backend == "reference" and info.device_seconds > 0 and info.total_seconds >= info.device_seconds
    result = attn_client.check(out, q, k, v, causal=causal, scale=scale)
    assert result.close, result
    ref = attn_client.reference(q, k, v, causal=causal, scale=scale)
    rounding = {np.dtype(np.float32): 1e-6, np.dtype(np.float16): 1e-3, np.dtype(ml_dtypes.bfloat16): 8e-3}
    worst = np.unravel_index(np.argmax(np.abs(out.astype(np.float64) - ref)), ref.shape)
    assert abs(float(out[worst]) - ref[worst]) <= rounding[np.dtype(dtype)] * max(1.0, abs(ref[worst])), worst


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_kv_lens_mask_each_sequences_keys(client, causal):
    q, k, v = inputs(3, 4, 40, 4, 2, 32, np.float16, seed=5)
    lens = [1, 40, 17]
    out = client.attend(q, k, v, causal=causal, kv_lens=lens)
    result = attn_client.check(out, q, k, v, causal=causal, kv_lens=lens)
    assert result.close, result
    # Keys past a length do not count: cutting K and V there gives the same batch element.
    cut = client.attend(q[2:], k[2:, :17], v[2:, :17], causal=causal)
    np.testing.assert_allclose(out[2:].astype(np.float64), cut.astype(np.float64), atol=2e-3)
    with pytest.raises(attn_client.AttnError) as e:
        client.attend(q, k, v, kv_lens=[1, 41, 2])
    assert e.value.message == "kv_lens[1] = 41 is outside 1..S (S = 40)"


def test_dtype_rounds_the_inputs_and_returns_the_callers_dtype(client):
    q, k, v = inputs(1, 16, 16, 2, 2, 32, np.float64)
    out = client.attend(q, k, v, dtype="bfloat16")
    assert out.dtype == np.float64
    assert attn_client.check(out.astype(ml_dtypes.bfloat16), *(x.astype(ml_dtypes.bfloat16) for x in (q, k, v))).close


class JaxLike:
    """Only __array__, as a JAX array offers to numpy (its bfloat16 is ml_dtypes')."""

    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


class DLPackOnly:
    """Only the DLPack protocol, as a PyTorch tensor or a CuPy array offers it."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("wrap", [JaxLike, DLPackOnly], ids=["__array__", "dlpack"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["float32", "float16"])
def test_array_protocols_give_the_same_output_as_numpy(client, wrap, dtype):
    q, k, v = inputs(1, 9, 9, 2, 1, 64, dtype, seed=3)
    want = client.attend(q, k, v, causal=True)
    got = client.attend(wrap(q), wrap(k), wrap(v), causal=True)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_bfloat16_through_array_protocol(client):
    q, k, v = inputs(1, 9, 9, 2, 2, 32, ml_dtypes.bfloat16, seed=4)
    np.testing.assert_array_equal(client.attend(JaxLike(q), JaxLike(k), JaxLike(v)), client.attend(q, k, v))


def test_generated_inputs(client):
    timings = client.attend_generated(1, 32, 2, 32, dtype="float32", causal=True, backend="cpu")
    assert timings.output is None and timings.backend == "cpu" and timings.device_seconds > 0
    a = client.attend_generated(1, 32, 2, 32, dtype="float16", seed=7, output=True)
    b = client.attend_generated(1, 32, 2, 32, dtype="float16", seed=7, output=True)
    assert a.output.shape == (1, 32, 2, 32) and a.output.dtype == np.float16
    np.testing.assert_array_equal(a.output, b.output)  # a pure function of the seed


def test_info_and_health(client):
    info = client.info()
    assert info.devices and info.devices[0].kind == "cpu"
    assert "codelab" in info.suites
    assert info.supports("cpu", "float32") and not info.gpu
    assert needs_cuda("cudnn").fullmatch(info.reason("cudnn"))
    # The proto's own messages, every field (suite_cases, limits.max_job_seconds, ...) included.
    assert isinstance(info.devices[0], attn_client.DeviceInfo) and isinstance(info.limits, attn_client.Limits)
    assert info.limits.max_job_seconds > 0 and [s.name for s in info.suite_cases] == list(info.suites)
    assert client.health() == attn_client.Health(server="SERVING", attention="SERVING")
