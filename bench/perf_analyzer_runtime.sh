#!/usr/bin/env bash
# perf_analyzer's wheel (PyPI perf-analyzer) is built for glibc 2.38 and GCC 13's libstdc++; a
# Debian 12 host has glibc 2.36. This puts a newer C runtime in DIR without touching the system:
# Debian 13's libc6, libstdc++6 and libgcc-s1, downloaded by apt from the host's own Debian
# mirror (the URIs of /etc/apt/sources.list.d/debian.sources, suite trixie, with a private apt
# state under DIR) and unpacked. bench/perf_analyzer.sh runs perf_analyzer through DIR's loader
# when $ATTN_PA_RUNTIME=DIR. Nothing else uses it.
#
#   bench/perf_analyzer_runtime.sh DIR      prints DIR's library folder (ATTN_PA_RUNTIME's value)
set -euo pipefail
dir=$(mkdir -p "$1" && cd "$1" && pwd)
lib=$dir/root/usr/lib/x86_64-linux-gnu
if [ ! -x "$lib/ld-linux-x86-64.so.2" ]; then
  sources=/etc/apt/sources.list.d/debian.sources
  uri=$(awk '/^URIs:/ {print $2; exit}' "$sources" 2>/dev/null || true)
  [ -n "$uri" ] || { echo "perf_analyzer_runtime: no Debian URIs in $sources" >&2; exit 2; }
  mkdir -p "$dir/apt/parts" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$dir/debs"
  printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" >"$dir/apt/parts/trixie.sources"
  opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/apt/parts"
        -o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache" -o APT::Sandbox::User=root)
  apt-get -qq "${opts[@]}" update >/dev/null
  (cd "$dir/debs" && apt-get -qq "${opts[@]}" download libc6 libstdc++6 libgcc-s1 >/dev/null)
  for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root"; done
  rm -rf "$dir/apt"
fi
echo "$lib"
