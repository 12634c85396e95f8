#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds, runs unit, integration and security
# tests (integration and security need root; without it they skip with a reason).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 600 -j"${CTEST_JOBS:-2}" "$@"
