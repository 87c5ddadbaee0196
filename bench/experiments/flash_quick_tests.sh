#!/usr/bin/env bash
# The smallest device call: the CUDA tests a flash-attention or numerics-check
# change touches most (the persistent kernel's bit-for-bit test, the numerics
# check of a recognized bf16 attention), nothing else. From the repository
# root, carrying ["build-device/dist.tar.xz"]: bash bench/experiments/flash_quick_tests.sh
set -u
rm -rf build-device/dist && tar -C build-device -xJf build-device/dist.tar.xz
export LD_LIBRARY_PATH=$PWD/build-device/dist/lib FUSEBOX_CACHE_DIR=/tmp/fbc-quick
tests_dir="$(cat build-device/dist/source_dir.txt)"
if [[ ! -d "$tests_dir" ]]; then mkdir -p "$(dirname "$(dirname "$tests_dir")")"; ln -sfn "$PWD" "$(dirname "$tests_dir")"; fi
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 build-device/dist/bin/frontend_tests \
  --gtest_filter='*BlockOrdersAndThePersistentKernel*Cuda*:*TheNumericsCheckComparesTheRecognizedNode*Cuda*:*WarpSpecializedKernelMatchesFloat64*Cuda*' 2>&1 |
  grep -E '^\[  (PASSED|FAILED|  OK)|^\[       OK|FAILED|Failure|warning' | head -30
