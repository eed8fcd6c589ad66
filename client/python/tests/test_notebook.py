"""The codelab notebook end to end, headless, against the cpu-backend server: every cell runs
and every table it shows has rows (notebooks/run.py, the same check the GPU run makes)."""
import os
import pathlib
import sys

NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
sys.path.insert(0, str(NOTEBOOKS))

import run as notebook_run  # noqa: E402  (notebooks/run.py)

# What the codelab's sections 3-10 show on any server: a table per step, the benchmark job's
# tables (titles as attn-client prints them) and their plots.
EXPECTED_TITLES = [
    "attn service", "Attention inputs", "Naive attention", "Service SDPA (auto) vs naive", "cuDNN fused attention",
    "Causal masking effect on attention output", "Attention timing — B=4, T=128, N=8, H=64",
    "Sequence-length sweep — B=4, N=8, H=64", "Batch-size sweep — T=256, N=8, H=64", "Correctness",
    "Multi-head attention variants — all should produce the same output shape",
    "Multi-head attention variants (MHA, GQA, MQA) — B=2, T=64, N=8, H=64",
    "Causal sequence-length sweep — B=4, N=8, H=64, causal", "FP8 attention", "This notebook",
]


def test_codelab_notebook_runs_against_the_cpu_server(server, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTN_TARGET", server.address)
    run = notebook_run.execute(NOTEBOOKS / "codelab.ipynb")
    out = os.environ.get("ATTN_NOTEBOOK_OUT")
    if out:  # keep the executed notebook (client/python/test.sh puts it in the build folder)
        import nbformat

        nbformat.write(run.notebook, out)
    titles = [t for t, _ in run.tables]
    for expected in EXPECTED_TITLES:
        assert any(t.startswith(expected) for t in titles), f"no table {expected!r}; tables: {titles}"
    assert not run.empty_tables, run.tables
    assert run.figures >= 5  # timing, sequence, batch, MHA/GQA/MQA, causal sweep
