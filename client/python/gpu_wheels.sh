#!/usr/bin/env bash
# The wheels gpu_notebook.sh installs on the GPU machine (Python 3.12, x86-64; nothing can be
# fetched there), into DIR (default .whl, git-ignored, which a device call carries):
# attn_client's own wheel, built here with its stubs, and the notebook run's packages at the
# pinned versions: grpcio and protobuf (the stubs need these versions; that machine's may be
# older) and nbclient/ipykernel with what they need. numpy, ml_dtypes, pandas, matplotlib and
# tqdm are left to that machine's own (its torch/JAX image has them).
#
#   client/python/gpu_wheels.sh [DIR]        run from the repository root
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-.whl}
rm -rf "$dir" && mkdir -p "$dir"
python3 -m pip wheel -q --disable-pip-version-check --no-deps --wheel-dir "$dir" "$here"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 \
  manylinux2014_x86_64 manylinux1_x86_64; do platforms+=(--platform "$p"); done
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" --dest "$dir" -c "$here/constraints.txt" \
  -c "$here/requirements-test.txt" grpcio protobuf nbclient nbformat ipykernel
ls "$dir"
echo "gpu_wheels: $(ls "$dir" | wc -l) wheels, $(du -sm "$dir" | cut -f1) MiB in $dir"
