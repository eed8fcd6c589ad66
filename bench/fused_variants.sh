#!/usr/bin/env bash
# Builds kernel variants of the fused backend beside a configured build, for side-by-side timing
# in one device call: each variant recompiles one fused_hdim<H>.cu with extra flags (the kernels'
# ATTN_FUSED_* macros) and relinks attn-bench (and, with --tests, attn_engine_tests) against a
# copy of libattn_engine.a holding that object.
#   bash bench/fused_variants.sh BUILD OUT [--tests] NAME:HDIM:FLAGS...
#   e.g. bench/fused_variants.sh build-gpu .gpu-var 'bn64:128:-DATTN_FUSED_WGMMA_BLOCK_N=64'
# Writes OUT/attn-bench-NAME (and OUT/attn_engine_tests-NAME); bundle them with the rest.
set -euo pipefail
build=$1 out=$2; shift 2
tests=0
if [ "${1:-}" = --tests ]; then tests=1; shift; fi
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/fused_object.sh"
mkdir -p "$out"
for spec in "$@"; do
  name=${spec%%:*} rest=${spec#*:}
  hdim=${rest%%:*} flags=${rest#*:}
  work=$(mktemp -d)
  # The build's own compile command for that object, with the variant's flags.
  cmd=$(fused_object_command "$root/$build" "$hdim" "$work/fused_hdim$hdim.cu.o")
  (cd "$root/$build" && eval "$cmd $flags")
  cp "$root/$build/engine/libattn_engine.a" "$work/libattn_engine.a"
  ar r "$work/libattn_engine.a" "$work/fused_hdim$hdim.cu.o"
  for target in engine/attn-bench $([ $tests = 1 ] && echo tests/attn_engine_tests); do
    link=$(cd "$root/$build" && ninja -t commands "$target" | tail -1)
    link=${link//engine\/libattn_engine.a/$work/libattn_engine.a}
    link=${link/ -o $target / -o $root/$out/$(basename "$target")-$name }
    (cd "$root/$build" && eval "$link")
  done
  rm -rf "$work"
  echo "fused_variants: $name (H=$hdim, $flags)"
done
