#!/usr/bin/env bash
# The test command: installs what is missing, builds attn with its tests and runs them, then
# the deployment checks (scripts/deploy-check.sh) with the attn-server it built.
# GPU tests skip (with the reason) on machines without a GPU; on a lent one, bench/gpu.sh runs
# them (README.md's "Running the GPU tests"). CUDA code is built for one architecture (sm_90a,
# which includes the fused backend's Hopper kernel) to keep CI short; the engine's objects are
# compiled for the L4's sm_89 too, and a build without CUDA (a participant's laptop) runs its
# engine and server tests.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
scripts/deps.sh --test

# .clang-format is enforced: every tracked C++/CUDA source as clang-format writes it.
scripts/format.sh --check

build=${ATTN_BUILD_DIR:-build-test}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${ATTN_CUDA_ARCHITECTURES:-90a}" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep -E '^-- attn:' "$build.configure.log"
cmake --build "$build" -j"$(nproc)"
# The L4's code (sm_89, the Dockerfile's architecture), compiled only, so nothing breaks it unseen
# (bench/gpu.sh l4 runs it on a lent GPU): the engine's objects, its CUDA sources and the host code
# that asks which kernels were built (fused/heuristics.cc), less the cuDNN host sources, which do
# not change with the architecture (3 of the 3.5 minutes the whole library takes here).
if grep -q '^-- attn: CUDA ON' "$build.configure.log"; then
  cmake -S . -B "$build-sm89" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=OFF \
    -DATTN_BUILD_SERVICE=OFF -DCMAKE_CUDA_ARCHITECTURES=89 >"$build-sm89.configure.log" 2>&1 \
    || { cat "$build-sm89.configure.log"; exit 1; }
  grep -E '^-- attn:' "$build-sm89.configure.log"
  mapfile -t sm89_objects < <(ninja -C "$build-sm89" -t targets all \
    | grep -E '^engine/CMakeFiles/attn_engine\.dir/.*\.o:' \
    | grep -vE '/src/cudnn(_fp8)?/[^/]*\.cc\.o:' | cut -d: -f1)
  [ ${#sm89_objects[@]} -gt 5 ] || { echo "no sm_89 engine objects found in $build-sm89"; exit 1; }
  ninja -C "$build-sm89" -j"$(nproc)" "${sm89_objects[@]}"
fi
# The build a machine without the CUDA toolkit makes (run.sh on a participant's laptop:
# -DATTN_ENABLE_CUDA=OFF, the cpu and reference backends, the others unavailable with a reason):
# its engine and server tests, built and run, so a change that only builds or behaves with CUDA
# is caught here.
cmake -S . -B "$build-nocuda" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTN_BUILD_TESTS=ON \
  -DATTN_ENABLE_CUDA=OFF >"$build-nocuda.configure.log" 2>&1 \
  || { cat "$build-nocuda.configure.log"; exit 1; }
grep -E '^-- attn:' "$build-nocuda.configure.log"
cmake --build "$build-nocuda" -j"$(nproc)" --target attn_engine_tests attn_server_tests
nocuda_rc=0
for t in attn_engine_tests attn_server_tests; do
  "$build-nocuda/tests/$t" --gtest_brief=1 >"$build-nocuda/$t.log" 2>&1 || nocuda_rc=1
  echo "without CUDA, $t: $(grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$build-nocuda/$t.log" \
    | tr -s ' ' | tr '\n' ' ')"
  grep -B2 -A6 'Failure$' "$build-nocuda/$t.log" | head -40 || true
done

cd "$build"
set +e
ctest --output-on-failure -j"$(nproc)" >ctest.log 2>&1
rc=$?
set -e
[ "$rc" -ne 0 ] || rc=$nocuda_rc
# Everything but the passing and skipped lines (ctest lists each skipped test again at the end).
sed '/The following tests did not run/,$d' ctest.log | grep -vE 'Test +#[0-9]+: .*(Passed|\*\*\*Skipped)' \
  | grep -vE '^ *Start +[0-9]+:' || true
total=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#' ctest.log || true)
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#.*\*\*\*Skipped' ctest.log || true)
echo "== $total tests: $((total - skipped)) ran, $skipped skipped; the reasons gtest gave:"
for t in ./tests/attn_engine_tests ./tests/attn_server_tests ./tests/attn_client_tests; do
  [ -x "$t" ] || continue
  "$t" --gtest_brief=1 2>&1 | grep -A1 ': Skipped$' | grep -vE ': Skipped$|^--$' | sort | uniq -c || true
done
cd "$root"

# The deployment files, offline (scripts/deploy-check.sh): kustomize renders, Kubernetes schemas,
# promtool, Terraform, the dashboard, and the attn-server just built started as the Deployment
# starts it, whose real /metrics must hold every metric the dashboard and rules use. Failures,
# skips and the totals are shown; the full list is in $build/deploy-check.log.
echo "== deploy checks (scripts/deploy-check.sh; every line in $build/deploy-check.log)"
deploy_rc=0
ATTN_SERVER_BIN="$(realpath "$build")/server/attn-server" ATTN_DEPLOY_REQUIRE_SERVER=1 \
  scripts/deploy-check.sh >"$build/deploy-check.log" 2>&1 || deploy_rc=$?
grep -vE '^PASS ' "$build/deploy-check.log" || true

# The Python client (client/python/test.sh): a fresh venv under $build, attn_client installed as a
# participant installs it, pytest against this attn-server, the codelab notebook headless.
echo "== attn_client (client/python/test.sh)"
python_rc=0
client/python/test.sh "$build/server/attn-server" "$build" || python_rc=$?

# The Open Inference Protocol facade (tests/kserve/test.sh): tritonclient and perf_analyzer, pinned,
# in a fresh venv under $build, against this attn-server.
echo "== KServe v2 / Triton clients (tests/kserve/test.sh)"
kserve_rc=0
tests/kserve/test.sh "$build/server/attn-server" "$build" || kserve_rc=$?
# The cohort's JupyterHub live on loopback (tests/deploy/jupyterhub_live.sh): the deployed hub
# config with a local spawner in KubeSpawner's place, two participants each running the codelab
# notebook on their own server through the hub, against this attn-server with tokens on.
echo "== JupyterHub for the cohort (tests/deploy/jupyterhub_live.sh)"
hub_rc=0
tests/deploy/jupyterhub_live.sh "$build/server/attn-server" "$build" || hub_rc=$?
[ "$rc" -ne 0 ] || rc=$deploy_rc
[ "$rc" -ne 0 ] || rc=$python_rc
[ "$rc" -ne 0 ] || rc=$kserve_rc
[ "$rc" -ne 0 ] || rc=$hub_rc
exit $rc
