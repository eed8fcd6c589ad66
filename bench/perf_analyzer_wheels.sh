#!/usr/bin/env bash
# The wheel `bench/gpu.sh perf_analyzer` unpacks on the GPU machine (nothing can be fetched
# there), into DIR (default .whl-pa, git-ignored, which a device call carries): perf-analyzer at
# tests/kserve/requirements.txt's version, a py3-none manylinux_2_38 wheel holding the
# perf_analyzer binary (the script runs only that binary).
#
#   bench/perf_analyzer_wheels.sh [DIR]        run from the repository root
set -euo pipefail
dir=${1:-.whl-pa}
req=tests/kserve/requirements.txt
rm -rf "$dir" && mkdir -p "$dir"
python3 -m pip download -q --disable-pip-version-check --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_38_x86_64 --dest "$dir" --no-deps $(grep -E '^perf-analyzer==' "$req")
ls "$dir"
echo "perf_analyzer_wheels: $(du -sm "$dir" | cut -f1) MiB in $dir"
