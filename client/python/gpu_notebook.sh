#!/usr/bin/env bash
# One device call for issue 22's GPU bar: the codelab notebook (notebooks/codelab.ipynb) run
# headless against attn-server on the GPU, then the JAX notebook cells (bench/jax_codelab.py) on
# the same GPU in the same call, and the ratio of their wall times (the bar: <= 0.25). First,
# JAX and PyTorch arrays (GPU tensors, bfloat16) through attend, which CI cannot try.
#
# Here, from the repository root:
#   ../shared/gpu/bundle .gpu build-gpu/server/attn-server     (attn-server built for sm_90a)
#   client/python/gpu_wheels.sh .whl                          (attn_client and the run's wheels)
# Device call: carry [".gpu", ".whl"], command `bash client/python/gpu_notebook.sh`.
# BUNDLE, WHEELS and OUT override .gpu, .whl and the output folder ($OUT there).
set -uo pipefail
b=${BUNDLE:-.gpu}
whl=${WHEELS:-.whl}
out=${OUT:-/tmp/attn-gpu}
py=${PYTHON:-python3}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
site=""
if ls "$whl"/*.whl >/dev/null 2>&1; then
  site=/tmp/attn-site
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$whl"/*.whl \
    || { echo "gpu_notebook: installing $whl failed"; exit 1; }
fi

# SERVER_FLAGS: more attn-server flags (e.g. --prewarm_suite= to start without the codelab
# suite's plans built).
# shellcheck disable=SC2086
"$b/run" attn-server --listen_address=127.0.0.1:50051 --metrics_address= ${SERVER_FLAGS:-} >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 1 300); do grep -qs ' SERVING' "$out/server.log" && break; sleep 0.2; done
grep -m1 'SERVING' "$out/server.log" || { echo "gpu_notebook: attn-server did not serve"; cat "$out/server.log"; exit 1; }

echo "== JAX and PyTorch arrays through attend (tests/frameworks_check.py; CI has neither)"
PYTHONPATH=$site ATTN_TARGET=127.0.0.1:50051 "$py" client/python/tests/frameworks_check.py
frameworks_rc=$?

echo "== the codelab notebook against attn-server (notebooks/run.py; executed copy: $out/codelab-gpu.ipynb)"
PYTHONPATH=$site ATTN_TARGET=127.0.0.1:50051 "$py" client/python/notebooks/run.py --out "$out/codelab-gpu.ipynb" \
  | tee "$out/notebook.log"
notebook_rc=${PIPESTATUS[0]}
kill -TERM "$server"; wait "$server"

echo "== the JAX notebook cells (bench/jax_codelab.py), same GPU, same call"
if "$py" -c 'import jax' 2>/dev/null; then
  "$py" bench/jax_codelab.py | tee "$out/jax.log"
else
  echo "no JAX here: only the notebook ran" | tee "$out/jax.log"
fi

notebook_s=$(sed -n 's/^notebook .*; wall \([0-9.]*\) s$/\1/p' "$out/notebook.log")
jax_s=$(sed -n 's/^wall total .*: \([0-9.]*\) s$/\1/p' "$out/jax.log")
if [ -n "$notebook_s" ] && [ -n "$jax_s" ]; then
  awk -v n="$notebook_s" -v j="$jax_s" 'BEGIN { printf "== notebook against attn %.1f s, JAX notebook cells %.1f s: %.3fx (bar: <= 0.25x) %s\n", n, j, n / j, (n / j <= 0.25 ? "MET" : "NOT MET") }'
fi
[ "$notebook_rc" -ne 0 ] || notebook_rc=$frameworks_rc
exit "$notebook_rc"
