"""The tables, DataFrame and plots against attn-client's golden files (tests/client/golden/:
a synthetic run with every section kind, written by the C++ renderers), so the package prints
exactly what the CLI prints."""
import csv
import json

import grpc

import pytest

import attn_client
from conftest import GOLDEN


@pytest.fixture(scope="module")
def golden():
    return attn_client.Results.from_json(GOLDEN / "results.json")


def test_text_is_the_clis_tables(golden):
    assert str(golden) == (GOLDEN / "tables.txt").read_text()


def test_rows_are_the_clis_csv(golden):
    with open(GOLDEN / "results.csv") as f:
        rows = list(csv.DictReader(f))
    ours = golden.rows()
    assert len(ours) == len(rows)
    for mine, theirs in zip(ours, rows):
        assert list(mine) == list(theirs)
        for column, text in theirs.items():
            value = mine[column]
            if value is None:
                assert text == "", column
            elif isinstance(value, bool):
                assert text == str(value).lower(), column
            elif isinstance(value, float):
                assert value == pytest.approx(float(text), rel=1e-5), column
            else:
                assert str(value) == text, column


def test_from_json_accepts_text_and_dicts(golden):
    text = (GOLDEN / "results.json").read_text()
    for source in (text, json.loads(text)):
        assert str(attn_client.Results.from_json(source)) == str(golden)
    with pytest.raises(ValueError, match="attn.bench.v1"):
        attn_client.Results.from_json({"schema": "other"})


def test_table_lookup_and_html(golden):
    fp8 = golden.table("fp8")
    assert fp8.rows[0] == ["GPU", "NVIDIA H200"] and ["FP8 speed-up over bf16", "1.47x"] in fp8.rows
    assert golden.table("timing").rows == [["naive float32", "1.280"], ["cudnn bfloat16", "0.2560"]]
    page = golden.table("sequence sweep")._repr_html_()
    assert page.count("<tr>") == 4 and "n/a" in page and "attn-table" in page
    assert golden.table("sequence sweep").to_pandas().shape == (3, 3)


def test_plots(golden):
    figs = golden.plot()
    assert [f.axes[0].get_title() for f in figs] == [
        "Attention latency (ms per call) — B=4, T=128, N=8, H=64",
        "Attention latency vs sequence length",
        "Attention latency vs batch size",
        "Multi-head attention variants (MHA, GQA, MQA) — B=2, T=64, N=8, H=64",
        "FP8 vs bf16 — B4 T2048 S2048 N8 K8 H64 causal",
    ]
    sweep = golden.plot("sequence sweep").axes[0]
    # cudnn bfloat16 is unsupported at T=256: its line stops at 128.
    assert [list(l.get_xdata()) for l in sweep.get_lines()] == [[64, 128, 256], [64, 128]]


def test_fp8_unsupported_on_the_gpu(golden):
    # An L4 (compute capability 8.9): cudnn_fp8 cannot run, so the FP8 section keeps bf16 alone
    # and the FP8 table says why, as attn-client prints it.
    results = attn_client.Results.from_json(GOLDEN / "results.json")
    fp8 = next(r for r in results.cases if r.case.backend == "cudnn_fp8")
    fp8.status, fp8.message, fp8.backend = grpc.StatusCode.FAILED_PRECONDITION.value[0], "cudnn_fp8: needs compute capability >= 9.0", ""
    fp8.ClearField("fp8")
    table = results.table("fp8")
    assert table.title == "FP8 attention — not available on this GPU"
    assert table.rows == [["GPU", "NVIDIA H200"], ["FP8 support", "cudnn_fp8: needs compute capability >= 9.0"]]
    bars = results.plot("FP8 vs bf16").axes[0]
    assert [t.get_text() for t in bars.get_yticklabels()] == ["cudnn bfloat16"]
