#!/usr/bin/env bash
# A short device call: shards 1 and 2 of the attention GPU tests
# (flash_persistent_call.sh's filter), then fusebox_bench's attention rows
# without, then with the persistent kernel (Knob::kFlashPersistent), no
# PyTorch. Not part of the build or the bench. On the device, from the
# repository root, carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/flash_persistent_ab.sh
set -u
source bench/experiments/unpack_dist.sh /tmp/fbc-tests
nvidia-smi --query-gpu=name --format=csv,noheader
filter='*FlashAttention*Cuda*:*Attention*Cuda*:*Sdpa*Cuda*:*Gpt2*Cuda*:*Gpt*Cuda*'
for i in 1 2; do
  GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i timeout 75 build-device/dist/bin/frontend_tests --gtest_filter="$filter" >"$OUT/t_f$i.log" 2>&1 &
done
wait
for i in 1 2; do
  echo "t_f$i: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/t_f$i.log" | tr '\n' ' ')"
  grep -E '^\[       OK \]|^\[  FAILED  \]|Failure' "$OUT/t_f$i.log" | cut -c1-160 | head -20
done
for setting in FUSEBOX_TUNE_FLASH_PERSISTENT=1 FUSEBOX_TUNE_FLASH_PERSISTENT=2; do
  echo "== $setting"
  env $setting build-device/dist/bin/fusebox_bench --filter attention 2>&1 | grep -E '^attention'
done
