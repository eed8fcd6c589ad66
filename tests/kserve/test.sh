#!/usr/bin/env bash
# The Open Inference Protocol (KServe v2) facade against a real attn-server (the cpu backend on
# loopback), driven by Triton's own tools: a fresh venv with tritonclient[grpc] and perf_analyzer
# at the versions pinned in requirements.txt, then pytest (test_kserve.py): live/ready/metadata,
# ModelInfer in FP32/FP16/BF16 against a float64 reference, bad inputs, tokens, metrics, and a
# short perf_analyzer concurrency sweep (bench/perf_analyzer.sh) with no errors.
#
#   tests/kserve/test.sh ATTN_SERVER [BUILD_DIR]
#
# ATTN_SERVER: the attn-server binary (or $ATTN_SERVER_BINARY). The venv is BUILD_DIR/kserve-venv
# (default build-test/). perf_analyzer's wheel needs glibc 2.38: on an older host it is unpacked
# into the venv and run through bench/perf_analyzer_runtime.sh's newer C runtime
# (BUILD_DIR/perf-analyzer-runtime). Exits with pytest's status.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
server=${1:-${ATTN_SERVER_BINARY:-}}
[ -x "$server" ] || { echo "tests/kserve/test.sh: no attn-server binary at '$server'" >&2; exit 2; }
server=$(realpath "$server")
build=$(realpath "${2:-$root/build-test}")
venv=$build/kserve-venv
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check)

rm -rf "$venv"
python3 -m venv "$venv"
"${pip[@]}" -r <(grep -v '^perf-analyzer==' "$here/requirements.txt")
pin=$(grep '^perf-analyzer==' "$here/requirements.txt")
pa_runtime=
if "${pip[@]}" "$pin" 2>/dev/null; then
  pa=$("$venv/bin/python" -c 'import os, perf_analyzer; print(os.path.join(os.path.dirname(perf_analyzer.__file__), "bin", "perf_analyzer"))')
else
  # pip refuses the wheel on this glibc: take it as it is, with the runtime it needs.
  "${pip[@]}" --no-deps --only-binary=:all: --platform manylinux_2_38_x86_64 --target "$venv/perf-analyzer" "$pin"
  pa=$venv/perf-analyzer/perf_analyzer/bin/perf_analyzer
fi
if ! "$pa" --version >/dev/null 2>&1; then
  pa_runtime=$("$root/bench/perf_analyzer_runtime.sh" "$build/perf-analyzer-runtime")
fi
cd "$here"
ATTN_SERVER_BINARY=$server ATTN_PERF_ANALYZER=$pa ATTN_PA_RUNTIME=$pa_runtime \
  "$venv/bin/python" -m pytest -q -rs -p no:cacheprovider test_kserve.py
