#!/usr/bin/env bash
# Install check, run by ctest (test `install_consumer`) after the build:
#   check.sh BUILD_DIR WORK_DIR [CXX] [GENERATOR]
# installs BUILD_DIR into WORK_DIR/prefix, configures and builds the consumer
# project beside this script against it, and runs it.
set -euo pipefail
build_dir="$1"
work="$2"
cxx="${3:-c++}"
generator="${4:-Unix Makefiles}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

rm -rf "$work"
mkdir -p "$work"
cmake --install "$build_dir" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/include/fusebox/fusebox.h"
cmake -S "$here" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$work/prefix"
cmake --build "$work/build"
FUSEBOX_CACHE_DIR="$work/cache" "$work/build/consumer"
