#!/usr/bin/env bash
# The machine code (SASS) of every fused kernel, for proving that a change to the kernels' source
# leaves what the GPU runs unchanged, on a machine without a GPU: compiles fused_hdim<H>.cu with
# the configured BUILD's own command (the production object, every instantiation), disassembles
# it (cuobjdump from NVIDIA's wheels, fused_object.sh) and writes OUT/hdim<H>.sass: each kernel's
# demangled name, then its instructions with their encodings, kernels sorted by name so that the
# order of the object's sections does not matter. `diff -r` of two OUTs is the comparison.
#   bash bench/fused_sass.sh BUILD OUT [--src DIR] [HDIM...]
# --src DIR compiles DIR/engine (e.g. an older commit's `git archive HEAD engine | tar -x -C DIR`)
# in place of the build's source tree. HDIM: the head dims (default: every fused_hdim<H>.cu). Run
# it under the build lock: each head dim is one nvcc run of minutes on two cores.
set -euo pipefail
build=$(cd "$1" && pwd) out=$2
shift 2
src=
if [ "${1:-}" = --src ]; then src=$(cd "$2" && pwd); shift 2; fi
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/bench/fused_object.sh"
tools=$(sass_tools "$root")
hdims=("$@")
if [ ${#hdims[@]} = 0 ]; then
  for f in "${src:-$root}"/engine/src/fused/fused_hdim*.cu; do
    f=${f##*fused_hdim}; hdims+=("${f%.cu}")
  done
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
for h in "${hdims[@]}"; do
  cmd=$(fused_object_command "$build" "$h" "$out/fused_hdim$h.cu.o")
  [ -n "$src" ] && cmd=${cmd//$root\/engine/$src/engine}
  (cd "$build" && eval "$cmd")
  "$tools/cuobjdump" -sass "$out/fused_hdim$h.cu.o" | python3 -c '
import re, subprocess, sys
kernels, name = {}, None
for line in sys.stdin:
    m = re.match(r"\s*Function : (\S+)", line)
    if m:
        name = m.group(1)
        kernels[name] = []
    elif name and re.match(r"\s*/\*[0-9a-f]{4,}\*/|\s*/\* 0x[0-9a-f]+ \*/", line):
        kernels[name].append(line.strip())
names = sorted(kernels)
plain = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                       text=True, check=True).stdout.split("\n")
for mangled, demangled in sorted(zip(names, plain), key=lambda x: x[1]):
    print("Function : " + demangled)
    print("\n".join(kernels[mangled]))
' > "$out/hdim$h.sass"
  echo "fused_sass: H=$h: $(grep -c '^Function' "$out/hdim$h.sass") kernels, $(grep -vc '^Function' "$out/hdim$h.sass") lines"
done
