#!/usr/bin/env bash
# Builds variants of the fused kernels beside a configured build, for side-by-side timing in one
# device call: a variant is a patch (bench/patches/*.patch; NOTES.md in engine/src/fused says what
# each measured) applied to a copy of the working tree's engine/. The copy's fused_hdim<H>.cu of
# each head dim given, and every engine .cc/.cu the patch touches, are compiled with the build's
# own commands, and attn-bench (and, with --tests, attn_engine_tests) relinked against a copy of
# libattn_engine.a holding those objects. A variant of a tile is a one-line patch of tiles.h.
#   bash bench/fused_patch.sh BUILD OUT [--tests] NAME:HDIMS:PATCH[:NVCC_FLAGS]...
#   e.g. bash bench/fused_patch.sh build .gpu-var ws-pp:128:bench/patches/ws-pingpong.patch
#        bash bench/fused_patch.sh build .gpu-var --tests ws-static:64,96,128:bench/patches/ws-static.patch
#        bash bench/fused_patch.sh build .gpu-var --tests ws-lineinfo:128::-lineinfo
# HDIMS: a comma list of head dims; PATCH may be empty (the build's own source, e.g. with
# -lineinfo for racecheck's source lines); NVCC_FLAGS go to the head dims' objects. Writes
# OUT/attn-bench-NAME (and OUT/attn_engine_tests-NAME); bundle them with the rest (bench/gpu_pack.sh
# BUILD OUT/*): `bench/gpu.sh variants` times each attn-bench-NAME beside attn-bench, and `tests`
# runs each attn_engine_tests-NAME.
set -euo pipefail
build=$(cd "$1" && pwd) out=$2; shift 2
tests=0
if [ "${1:-}" = --tests ]; then tests=1; shift; fi
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/fused_object.sh"
mkdir -p "$out"
out=$(cd "$out" && pwd)
for spec in "$@"; do
  name=${spec%%:*} rest=${spec#*:}
  hdims=${rest%%:*} rest=${rest#*:}
  patch=${rest%%:*} flags=
  [[ $rest == *:* ]] && flags=${rest#*:}
  work=$(mktemp -d)
  cp -r "$root/engine" "$work/engine"
  if [ -n "$patch" ]; then
    patch=$(realpath "$patch")
    (cd "$work" && git apply "$patch")
  fi
  # The objects to rebuild: each head dim's instantiations, and the engine's sources the patch
  # changes (headers reach the objects through the head dims).
  sources=()
  for h in ${hdims//,/ }; do sources+=("src/fused/fused_hdim$h.cu"); done
  while read -r path; do
    case $path in engine/src/*.cc | engine/src/*.cu) sources+=("${path#engine/}") ;; esac
  done < <([ -z "$patch" ] || (cd "$work" && git apply --numstat "$patch" | cut -f3))
  cp "$build/engine/libattn_engine.a" "$work/libattn_engine.a"
  for src in $(printf '%s\n' "${sources[@]}" | sort -u); do
    obj="$work/$(basename "$src").o"
    cmd=$(engine_object_command "$build" "$src" "$obj")
    cmd=${cmd//$root\/engine/$work/engine}
    [[ $src == src/fused/fused_hdim* ]] && cmd="$cmd $flags"
    (cd "$build" && eval "$cmd")
    ar r "$work/libattn_engine.a" "$obj"
  done
  for target in engine/attn-bench $([ $tests = 1 ] && echo tests/attn_engine_tests); do
    link=$(cd "$build" && ninja -t commands "$target" | tail -1)
    link=${link//engine\/libattn_engine.a/$work/libattn_engine.a}
    link=${link/ -o $target / -o $out/$(basename "$target")-$name }
    (cd "$build" && eval "$link")
  done
  rm -rf "$work"
  echo "fused_patch: $name (H=$hdims${patch:+, $(basename "$patch")}${flags:+, $flags})"
done
