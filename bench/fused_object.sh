#!/usr/bin/env bash
# Sourced by bench/fused_patch.sh, bench/fused_sass.sh and bench/sass_order.sh.
# engine_object_command BUILD SRC OUT: the configured BUILD's own compile command (run it in BUILD)
# for the engine source SRC (relative to engine/, e.g. src/fused/fused_hdim128.cu), writing OUT
# instead of the build's object and no dependency file.
engine_object_command() {
  local build=$1 obj="engine/CMakeFiles/attn_engine.dir/$2.o" cmd
  cmd=$(cd "$build" && ninja -t commands "$obj" | tail -1)
  cmd=${cmd/ -o $obj/ -o $3}
  echo "${cmd/ -MD -MT $obj -MF $obj.d/}"
}
# fused_object_command BUILD HDIM OUT: the same for fused_hdim<HDIM>.cu.
fused_object_command() { engine_object_command "$1" "src/fused/fused_hdim$2.cu" "$3"; }

# sass_tools ROOT: the folder holding cuobjdump and nvdisasm (cuobjdump -sass runs nvdisasm from
# its own folder), both from NVIDIA's wheels pinned here, unpacked into ROOT/.deps/sass-tools.
SASS_TOOLS_VERSION=13.5.37
sass_tools() {
  local tools=$1/.deps/sass-tools/bin work
  if [ ! -x "$tools/cuobjdump" ] || [ ! -x "$tools/nvdisasm" ]; then
    work=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: -d "$work" \
      "nvidia-cuda-cuobjdump==$SASS_TOOLS_VERSION" "nvidia-cuda-nvdisasm==$SASS_TOOLS_VERSION"
    python3 - "$work" "$tools" <<'PY'
import glob, os, sys, zipfile
os.makedirs(sys.argv[2], exist_ok=True)
for wheel in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if name.endswith(("/bin/cuobjdump", "/bin/nvdisasm")):
                target = os.path.join(sys.argv[2], os.path.basename(name))
                with open(target, "wb") as f:
                    f.write(z.read(name))
                os.chmod(target, 0o755)
PY
    rm -rf "$work"
  fi
  echo "$tools"
}
