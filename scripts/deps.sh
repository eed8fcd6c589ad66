#!/usr/bin/env bash
# Installs what attn needs and is missing: the Debian packages in scripts/apt-packages.txt (and
# with --test those in scripts/apt-packages-test.txt) and,
# where the CUDA toolkit is present, the cudnn-frontend headers (from the nvidia-cudnn-frontend
# wheel, pinned below) into .deps/cudnn-frontend/include. Safe to run again: it only adds.
set -euo pipefail
cd "$(dirname "$0")/.."

CUDNN_FRONTEND_VERSION=1.32.0

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
lists=(scripts/apt-packages.txt)
[ "${1:-}" != "--test" ] || lists+=(scripts/apt-packages-test.txt)
mapfile -t wanted < <(cat "${lists[@]}" | grep -vE '^\s*(#|$)')
missing=()
for pkg in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

nvcc=$(command -v nvcc || true)
[ -n "$nvcc" ] || [ ! -x /usr/local/cuda/bin/nvcc ] || nvcc=/usr/local/cuda/bin/nvcc
if [ -n "$nvcc" ] && [ ! -f .deps/cudnn-frontend/include/cudnn_frontend.h ]; then
  echo "deps: fetching cudnn-frontend $CUDNN_FRONTEND_VERSION headers"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive ${sudo_cmd:-} apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
  fi
  rm -rf .deps/wheels && mkdir -p .deps/wheels .deps/cudnn-frontend
  # The wheel's headers are the same for every Python; name one so any local python3 can fetch it.
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 -d .deps/wheels "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION"
  python3 - <<'PY'
import glob, zipfile
wheel = glob.glob(".deps/wheels/nvidia_cudnn_frontend-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    headers = [n for n in z.namelist() if n.startswith("include/")]
    z.extractall(".deps/cudnn-frontend", headers)
print(f"deps: {len(headers)} cudnn-frontend headers in .deps/cudnn-frontend/include")
PY
fi
