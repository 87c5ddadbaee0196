#!/usr/bin/env bash
# Builds fusebox with sanitizers into a folder of its own and runs the test
# suite there: `tests/sanitize.sh address` (ASan + UBSan, build-asan) or
# `tests/sanitize.sh thread` (TSan, build-tsan). Further arguments go to
# ctest: `tests/sanitize.sh thread -L threads` runs only the threads tests.
# Any sanitizer report fails the test it came from.
set -euo pipefail
mode=${1:?usage: tests/sanitize.sh address|thread [ctest args]}
shift
case "$mode" in
  address) dir=build-asan ;;
  thread) dir=build-tsan ;;
  *) echo "tests/sanitize.sh: mode must be address or thread, not '$mode'" >&2; exit 2 ;;
esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSEBOX_SANITIZE="$mode" \
  -DFUSEBOX_BUILD_BENCH=OFF "${launcher[@]}"
cmake --build "$dir" -j "${FUSEBOX_SANITIZE_JOBS:-2}"
ctest --test-dir "$dir" --output-on-failure -j "${FUSEBOX_SANITIZE_JOBS:-2}" "$@"
