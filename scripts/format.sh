#!/usr/bin/env bash
# clang-format (.clang-format, Google based) over attn's C++ and CUDA sources that git tracks.
#   scripts/format.sh          rewrites them in place
#   scripts/format.sh --check  changes nothing; lists the files that differ and exits 1 if any
# scripts/test.sh runs the check.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--check" ]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if [ ${#bad[@]} -gt 0 ]; then
    printf 'not clang-formatted (run scripts/format.sh): %s\n' "${bad[@]}"
    exit 1
  fi
  echo "format: ${#files[@]} files clang-formatted"
else
  clang-format --style=file -i "${files[@]}"
fi
