#!/usr/bin/env bash
# Sourced by bench/fused_variants.sh and bench/sass_order.sh.
# fused_object_command BUILD HDIM OUT: the configured BUILD's own compile command for
# fused_hdim<HDIM>.cu (run it in BUILD), writing OUT instead of the build's object and no
# dependency file.
fused_object_command() {
  local build=$1 obj="engine/CMakeFiles/attn_engine.dir/src/fused/fused_hdim$2.cu.o" cmd
  cmd=$(cd "$build" && ninja -t commands "$obj" | tail -1)
  cmd=${cmd/ -o $obj/ -o $3}
  echo "${cmd/ -MD -MT $obj -MF $obj.d/}"
}
