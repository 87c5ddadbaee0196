#!/usr/bin/env bash
# The smallest device call: the CUDA tests a flash-attention or numerics-check
# change touches most (the persistent kernel's bit-for-bit test, the numerics
# check of a recognized bf16 attention), nothing else. From the repository
# root, carrying ["build-device/dist.tar.xz"]: bash bench/experiments/flash_quick_tests.sh
set -u
source bench/experiments/unpack_dist.sh /tmp/fbc-quick
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 100 build-device/dist/bin/frontend_tests \
  --gtest_filter='*BlockOrdersAndThePersistentKernel*Cuda*:*TheNumericsCheckComparesTheRecognizedNode*Cuda*:*WarpSpecializedKernelMatchesFloat64*Cuda*' 2>&1 |
  grep -E '^\[  (PASSED|FAILED|  OK)|^\[       OK|FAILED|Failure|warning' | head -30
