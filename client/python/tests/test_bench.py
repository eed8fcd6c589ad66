"""Benchmark jobs: results into a DataFrame with attn-client's columns, the codelab's tables
from a live job, and Ctrl-C cancelling the job on the server."""
import _thread
import csv
import re
import signal
import threading
import time

import pytest

import attn_client
from conftest import GOLDEN, needs_cuda

SMALL = dict(num_heads=4, head_dim=32, dtype="float32", backend="cpu")


def small_job():
    return ([attn_client.Case(batch=2, seq_len=t, section="sequence sweep", **SMALL) for t in (16, 32, 64)]
            + [attn_client.Case(batch=b, seq_len=32, section="batch sweep", **SMALL) for b in (1, 2, 4)]
            + [attn_client.Case(batch=1, seq_len=16, num_kv_heads=k, section="MHA/GQA/MQA", **SMALL) for k in (4, 2, 1)]
            + [dict(batch=4, seq_len=128, num_heads=8, head_dim=64, dtype="bfloat16", causal=True, backend="cpu",
                    section="correctness"),
               dict(batch=4, seq_len=128, num_heads=8, head_dim=64, dtype="bfloat16", backend="naive",
                    section="correctness")])


@pytest.fixture(scope="module")
def results(server):
    with attn_client.Client(server.address) as c:
        return c.bench(cases=small_job(), check=True, repeats=3, warmup=1, progress=False)


def test_dataframe_has_the_clis_columns(results):
    df = results.to_pandas()
    with open(GOLDEN / "results.csv") as f:
        assert list(df.columns) == next(csv.reader(f))
    assert len(df) == 11
    assert list(df["index"]) == list(range(11))
    assert list(df["status"]) == ["OK"] * 10 + ["FAILED_PRECONDITION"]
    ok = df[df["status"] == "OK"]
    assert (ok["median_ms"] > 0).all() and (ok["repeats"] == 3).all() and (ok["backend"] == "cpu").all()
    assert (ok["max_abs_error"] >= 0).all()  # checked: the numerics columns are filled
    assert needs_cuda("naive").fullmatch(df.loc[10, "message"])
    # The server's per-case seed: the job's seed (0) plus 192 per case index.
    assert list(df["seed"]) == [192 * i for i in range(11)]
    assert set(df["section"]) == {"sequence sweep", "batch sweep", "MHA/GQA/MQA", "correctness"}


def test_tables_of_a_live_job(results):
    keys = [t.key for t in results.tables()]
    assert keys == ["sequence sweep", "sequence sweep numerics", "batch sweep", "batch sweep numerics", "MHA/GQA/MQA",
                    "MHA/GQA/MQA numerics", "correctness", "causal effect"]
    for t in results.tables():
        assert t.rows and all(any(cell for cell in row) for row in t.rows), t.title
    seq = results.table("sequence sweep")
    assert seq.title == "Sequence-length sweep — B=2, N=4, H=32"
    assert seq.headers == ["Seq len", "cpu float32 (ms)"] and [r[0] for r in seq.rows] == ["16", "32", "64"]
    assert [r[0] for r in results.table("MHA/GQA/MQA").rows] == ["MHA", "GQA", "MQA"]
    # check=True: each sweep's numerics follow it, as attn-client prints them.
    numerics = results.table("sequence sweep numerics")
    assert numerics.title == "Numerics against the reference — sequence sweep"
    assert [r[1] for r in numerics.rows] == [f"B2 T{t} S{t} N4 K4 H32" for t in (16, 32, 64)]
    assert all(0 <= float(r[2]) < 1e-5 and r[4] for r in numerics.rows)
    notes = results.table("correctness").notes
    assert len(notes) == 1 and needs_cuda("naive", "  n/a  naive bfloat16: ").fullmatch(notes[0])
    effect = results.table("causal effect")
    assert float(effect.rows[0][1]) > 0.1 and float(effect.rows[1][1]) < 1e-2
    text = str(results)
    assert text.startswith("server: attn-server ") and "11 cases: 10 ok, 1 unsupported, 0 failed in " in text
    with pytest.raises(KeyError, match="no table 'fp8'"):
        results.table("fp8")


def test_plots_of_a_live_job(results):
    titles = [f.axes[0].get_title() for f in results.plot()]
    assert titles == ["Attention latency vs sequence length", "Attention latency vs batch size",
                      "Multi-head attention variants (MHA, GQA, MQA) — B=1, T=16, N=4, H=32"]
    line = results.plot("sequence sweep").axes[0].get_lines()[0]
    assert list(line.get_xdata()) == [16, 32, 64]


def test_progress_lines_without_tqdm(server, capsys, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_tqdm(name, *args, **kwargs):
        if name.startswith("tqdm"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    with attn_client.Client(server.address) as c:
        c.bench(cases=small_job()[:2], repeats=1, warmup=0)
    err = capsys.readouterr().err
    assert "2 cases on cpu" in err and "[2/2] cpu float32 B2 T32 S32 N4 K4 H32: OK" in err


def test_ctrl_c_cancels_the_job_on_the_server(own_server):
    # Three cases that take seconds each on the float64 reference (8.6 GFLOP a call at ~8 GFLOP/s on
    # two cores; the fast cpu backend would finish all three within the second before Ctrl-C);
    # Ctrl-C after the first has started.
    heavy = [attn_client.Case(batch=1, seq_len=2048, num_heads=8, head_dim=64, dtype="float32", backend="reference")] * 3
    # interrupt_main() does nothing while SIGINT is ignored, as it is in a test run started in the
    # background by a shell without job control (`cmd &`): Python's own handler for this test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with attn_client.Client(own_server.address) as c:
            timer = threading.Timer(1.0, _thread.interrupt_main)
            timer.start()
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                c.bench(cases=heavy, repeats=10, warmup=0, progress=False)
            assert time.monotonic() - started < 5
            deadline = time.monotonic() + 60
            cancelled = re.compile(r"rpc=RunBenchmark code=CANCELLED")
            while not cancelled.search(own_server.log_text()) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert cancelled.search(own_server.log_text()), own_server.log_text()
            assert c.health().serving  # and the server goes on serving
    finally:
        signal.signal(signal.SIGINT, previous)


def test_cases_with_kv_lens_get_their_own_rows_and_the_kv_bandwidth(client):
    cases = [attn_client.Case(batch=b, seq_len=1, kv_len=64, kv_lens=lens, section="decode", **SMALL)
             for b, lens in ((2, [3, 64]), (3, [1, 64, 20]))]
    results = client.bench(cases=cases, check=True, repeats=2, warmup=0, progress=False)
    table = results.table("decode")
    assert table.headers[4] == "K/V GB/s"
    assert [row[1] for row in table.rows] == ["B2 T1 S64 N4 K4 H32 kv_lens=[3,64]",
                                              "B3 T1 S64 N4 K4 H32 kv_lens=[1,64,20]"]
    # The column shows each case's K/V bandwidth to one decimal ("0.0" where a loaded machine
    # times these tiny cases slowly); the value itself is always measured.
    assert all(r.kv_gbps > 0 for r in results.cases)
    assert [row[4] for row in table.rows] == [f"{r.kv_gbps:.1f}" for r in results.cases]
    assert all(r.max_abs_error < 1e-5 for r in results.cases)


def test_cases_without_a_section_are_the_cases_table(client):
    # Cases sent without a section make one table, found by "cases" (or its title), as
    # attn-client names it.
    sweep = client.bench(cases=[attn_client.Case(batch=1, seq_len=t, **SMALL) for t in (16, 32)], repeats=1,
                         warmup=0, progress=False)
    assert [t.key for t in sweep.tables()] == ["cases"]
    assert sweep.table("cases").title == "Sequence-length sweep — B=1, N=4, H=32"
    assert sweep.table("Sequence-length sweep — B=1, N=4, H=32").key == "cases"
    assert sweep.plot("cases").axes[0].get_title() == "Attention latency vs sequence length"
    one = client.bench(cases=[attn_client.Case(batch=1, seq_len=16, **SMALL)], repeats=1, warmup=0, progress=False)
    assert one.table("cases").title == "Cases" and one.table("cases").rows[0][1] == "B1 T16 S16 N4 K4 H32"
