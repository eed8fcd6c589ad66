#!/usr/bin/env bash
# Where ptxas put the warp-specialised kernel's waits (wgmma_ws_kernel.cuh), read from the SASS on
# a machine without a GPU: compiles fused_hdim<H>.cu for sm_90a with the build's own command and
# extra flags, disassembles it (cuobjdump and nvdisasm, from NVIDIA's wheels pinned in
# fused_object.sh, into .deps/sass-tools) and prints the consumer's main step in order (wgmma groups, waits, barriers,
# the softmax's runs of exp2) and how many exp2 of the tile run before the wait for the P V issued
# with its S. The schedule means all of them to (the softmax under that P V): exit 1 otherwise.
# ctest runs it on H = 64, 96 and 128 (FusedWsSassOrder): ptxas moving that wait back above the
# softmax cost 2-5% on the H200 (NOTES.md, "The pinned P V wait lands"), and nothing else would
# notice.
#   bash bench/sass_order.sh BUILD HDIM [FLAGS...]
#   e.g. bash bench/sass_order.sh build 128 -Xptxas -v
set -euo pipefail
build=$(cd "$1" && pwd) hdim=$2
shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/fused_object.sh"
tools=$(sass_tools "$root")
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
cmd=$(fused_object_command "$build" "$hdim" "$cubin")
cmd=${cmd/ -c / -cubin }
cmd=$(sed -E 's/--generate-code=arch=compute_[0-9a]+,code=\[[^]]*\]/-arch=sm_90a/g' <<< "$cmd")
(cd "$build" && eval "$cmd $*")

# The bf16 instantiation of head dim H's WS kernel; its main step is the S group (wgmma with B
# from shared memory) followed by a P V group (B transposed, .tnspB).
"$tools/cuobjdump" -sass "$cubin" |
  awk -v re="FusedWgmmaWsKernel.*WgmmaWsTraitsILi${hdim}E.*nv_bfloat16" \
    '/Function :/ { p = ($0 ~ re) } p' |
  grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/ *;.*$//; s/^\s+//' |
  awk '
    { op = $0; sub(/^\/\*[0-9a-f]+\*\/ +(@!?U?P[0-9T] +)?/, "", op) }
    !(op ~ /^(HGMMA|MUFU.EX2|WARPGROUP.DEPBAR|SYNCS|VOTE|BAR|SHFL)/) { next }
    {
      kind = op
      if (op ~ /^HGMMA/) kind = (op ~ /tnspB/) ? "P V wgmma" : "S wgmma"
      else if (op ~ /^MUFU.EX2/) kind = "exp2"
      else if (op !~ /^WARPGROUP.DEPBAR/) sub(/ .*/, "", kind)
      # The main step: the first P V group straight after an S group.
      if (state == 0 && kind == "P V wgmma" && last == "S wgmma") state = 1
      else if (state == 1 && kind == "exp2") before++
      else if (state == 1 && kind ~ /DEPBAR.LE gsb0, 0x0/) state = 2
      if (kind != last) { if (last != "") print "  " last " x" n; last = kind; n = 0 }
      n++
    }
    END {
      print "  " last " x" n
      printf "main step: %d exp2 before the wait for its P V\n", before
      exit (state == 2 && before >= 32 ? 0 : 1)
    }'
