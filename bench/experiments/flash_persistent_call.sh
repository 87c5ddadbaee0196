#!/usr/bin/env bash
# One device call for the persistent warp-specialized flash kernel
# (Knob::kFlashPersistent): the attention GPU tests first (new and old
# kernels, bit-for-bit against the default), then device_run.sh's
# remote-bench on the attention and GPT-2 rows (with --profile: the goal
# run) and an A/B run of the knob on the attention rows.
# Not part of the build or the bench. On the device, from the repository
# root, carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/flash_persistent_call.sh
set -u
source bench/experiments/unpack_dist.sh /tmp/fbc-tests
filter='*FlashAttention*Cuda*:*Attention*Cuda*:*Sdpa*Cuda*:*Gpt2*Cuda*:*Gpt*Cuda*'
for i in 0 1 2; do
  GTEST_TOTAL_SHARDS=3 GTEST_SHARD_INDEX=$i timeout 75 build-device/dist/bin/frontend_tests --gtest_filter="$filter" >"$OUT/t_f$i.log" 2>&1 &
done
timeout 75 build-device/dist/bin/examples_tests --gtest_filter='*Cuda*:*Gpu*' >"$OUT/t_ex.log" 2>&1 &
wait
for f in t_f0 t_f1 t_f2 t_ex; do
  echo "$f: $(grep -E '^\[  (PASSED|FAILED)' "$OUT/$f.log" | tr '\n' ' ')"
  grep -E '^\[  FAILED  \]|Failure' "$OUT/$f.log" | head -10
done
echo "tests took $SECONDS s"
rm -f build-device/dist.tar.xz  # unpacked above: device_run.sh keeps this dist
FUSEBOX_BENCH_ARGS="--filter attention,gpt2_forward --profile" \
  FUSEBOX_AB="FUSEBOX_TUNE_FLASH_PERSISTENT=2@attention_causal" \
  bash bench/device_run.sh remote-bench
