#!/usr/bin/env bash
# Makes the bundle a device call carries (bench/gpu.sh runs it there): the programs its steps use,
# from the configured BUILD, with the shared libraries the GPU machine lacks
# (../shared/gpu/bundle), in .gpu, packed into .gpu-pack/bundle.tar.xz: the programs unpacked
# weigh more than the 64 MiB a call may carry for the whole tree, packed about a fifth of that.
#
#   bench/gpu_pack.sh BUILD [--base=SERVER] [--sm89=SM89_BUILD] [PROGRAM...]
#
# BUILD: a build with CUDA (e.g. build-test; README.md's "Running the GPU tests"). The programs:
# attn_engine_tests, attn_server_tests, attn_abuse_tests, attn-server, attn-bench, attn-load, and
# each extra PROGRAM given (a path: BUILD/client/attn-client and BUILD/tests/attn_client_tests
# for the client step, a variant's attn-bench-<name> for the variants step). --base=SERVER adds
# a landed commit's attn-server as attn-server-base, for the server_ab step. --sm89=SM89_BUILD
# adds a build for the CUDA architecture 89-virtual (PTX only) as sm89-attn_engine_tests and
# sm89-attn-bench, for the l4 step (named so that the tests and variants steps, which take
# attn_engine_tests* and attn-bench-*, leave them alone). Run it from the repository root; carry
# [".gpu-pack"] and run `bash bench/gpu.sh STEP...` there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bundle_tool=$root/../shared/gpu/bundle
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0" >&2
  exit 2
fi
build=$1
shift
programs=("$build/tests/attn_engine_tests" "$build/tests/attn_server_tests"
          "$build/tests/attn_abuse_tests" "$build/server/attn-server" "$build/engine/attn-bench"
          "$build/bench/attn-load")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for arg in "$@"; do
  case $arg in
    --base=*)
      cp -L "${arg#*=}" "$work/attn-server-base"
      programs+=("$work/attn-server-base")
      ;;
    --sm89=*)
      sm89=${arg#*=}
      if ! grep -qE '^CMAKE_CUDA_ARCHITECTURES:[A-Z]+=89(-virtual)?$' "$sm89/CMakeCache.txt"; then
        echo "gpu_pack: $sm89 is not a build for CUDA architecture 89-virtual" >&2
        exit 2
      fi
      for p in tests/attn_engine_tests engine/attn-bench; do
        [ -x "$sm89/$p" ] || { echo "gpu_pack: no program $sm89/$p (build it first)" >&2; exit 2; }
        cp -L "$sm89/$p" "$work/sm89-${p#*/}"
        programs+=("$work/sm89-${p#*/}")
      done
      ;;
    *) programs+=("$arg") ;;
  esac
done
for p in "${programs[@]}"; do
  [ -x "$p" ] || { echo "gpu_pack: no program $p (build it first)" >&2; exit 2; }
done
[ -x "$bundle_tool" ] || { echo "gpu_pack: no $bundle_tool" >&2; exit 2; }
"$bundle_tool" .gpu "${programs[@]}"
mkdir -p .gpu-pack
tar cJf .gpu-pack/bundle.tar.xz .gpu
echo "gpu_pack: .gpu-pack/bundle.tar.xz, $(du -m .gpu-pack/bundle.tar.xz | cut -f1) MiB (the tree a call carries: 64 MiB at most)"
