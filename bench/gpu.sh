#!/usr/bin/env bash
# One device call: the named steps (bench/gpu_steps.sh) run in order on the GPU machine from the
# bundle of programs built on this one, each step's summary printed with its time; full logs
# under $OUT. README.md's "Running the GPU tests" says how to build and pack the bundle and make
# the call; bench/README.md says what each step runs.
#
#   bash bench/gpu.sh [--bundle=DIR] STEP...
#
# STEP: tests serving sanitize judged paths decode fp8 naive suites server_ab client perf_analyzer
# variants notebook l4.
# The bundle is DIR (default .gpu); where .gpu is missing and .gpu-pack/bundle.tar.xz is there
# (the packed bundle bench/gpu_pack.sh makes, which fits the carry limit), it is unpacked first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=gpu_steps.sh source-path=SCRIPTDIR
source "$here/gpu_steps.sh"
steps=$(declare -F | sed -n 's/^declare -f gpu_step_//p' | tr '\n' ' ')
usage() {
  awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"
  exit 2
}

bundle=.gpu
names=()
for arg in "$@"; do
  case $arg in
    --bundle=*) bundle=${arg#*=} ;;
    -h | --help) usage ;;
    -*) echo "bench/gpu.sh: unknown option '$arg'" >&2; usage ;;
    *)
      if [[ " $steps" != *" $arg "* ]]; then
        echo "bench/gpu.sh: no step '$arg'; the steps: $steps" >&2
        exit 2
      fi
      names+=("$arg")
      ;;
  esac
done
[ ${#names[@]} -gt 0 ] || usage

if [ "$bundle" = .gpu ] && [ ! -x .gpu/run ] && [ -f .gpu-pack/bundle.tar.xz ]; then
  echo "unpacking .gpu-pack/bundle.tar.xz"
  tar xJf .gpu-pack/bundle.tar.xz || exit 1
fi
[ -x "$bundle/run" ] || { echo "bench/gpu.sh: no bundle in $bundle (bench/gpu_pack.sh makes it)" >&2; exit 2; }
g=$(cd "$bundle" && pwd)
out=${OUT:-/tmp/attn-gpu}
mkdir -p "$out"
trap gpu_stop_servers EXIT

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi: no GPU here)"
echo "bundle: $(cd "$g/bin" && printf '%s ' *)"
for name in "${names[@]}"; do
  echo
  echo "== $name"
  t0=$SECONDS
  "gpu_step_$name"
  gpu_stop_servers
  echo "== $name: $((SECONDS - t0)) s"
done
