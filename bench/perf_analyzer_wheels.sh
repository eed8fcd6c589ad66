#!/usr/bin/env bash
# The wheels bench/gpu_perf_analyzer.sh installs on the GPU machine (Python 3.12, x86-64, glibc
# 2.39, nothing can be fetched there), into DIR (default .whl-pa, git-ignored, which a device call
# carries): perf-analyzer (a py3-none manylinux_2_38 wheel holding the perf_analyzer binary) and
# tritonclient[grpc] with what it needs, at tests/kserve/requirements.txt's versions. numpy is
# left to that machine's own (its torch/JAX image has it).
#
#   bench/perf_analyzer_wheels.sh [DIR]        run from the repository root
set -euo pipefail
dir=${1:-.whl-pa}
req=tests/kserve/requirements.txt
rm -rf "$dir" && mkdir -p "$dir"
platforms=()
for p in manylinux_2_38_x86_64 manylinux_2_34_x86_64 manylinux_2_28_x86_64 manylinux_2_27_x86_64 \
  manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --implementation cp "${platforms[@]}" --dest "$dir" --no-deps \
  $(grep -vE '^\s*(#|$)|^(numpy|pytest)==' "$req")
ls "$dir"
echo "perf_analyzer_wheels: $(ls "$dir" | wc -l) wheels, $(du -sm "$dir" | cut -f1) MiB in $dir"
