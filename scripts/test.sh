#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs unit, integration and security
# tests (integration and security need root; without it they skip with a reason).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build=$(cd "${BUILD_DIR:-build}" && pwd)
status=0
(cd "$build" && ctest --output-on-failure --timeout 600 -j"${CTEST_JOBS:-2}" "$@") || status=$?
# The clients' suites, each against a real corrald from this build (skipped with ctest filters).
if (($# == 0)); then
  export CORRAL_BUILD_DIR="$build"
  (cd clients/typescript && npm test --silent) || status=$?
  # Debian's pytest (python3-pytest) under Debian's python3, whatever python3 is first on PATH.
  (cd clients/python && /usr/bin/python3 -m pytest -q -p no:cacheprovider tests) || status=$?
fi
exit $status
