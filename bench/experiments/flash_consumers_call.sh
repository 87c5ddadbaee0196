#!/usr/bin/env bash
# One device call after the setmaxnreg fix (two consumers at head dim 64
# under the persistent producer asked more registers than the block holds
# and waited forever): the BlockOrders test that hung, the flash compile
# tests and the GPT-2 mask test, then the two-consumer head dim 64 arm of
# the attention rows beside the rule's three (FUSEBOX_TUNE_FLASH_CONSUMERS).
# From the repository root, carrying ["build-device/dist.tar.xz"].
set -u
source bench/experiments/unpack_dist.sh /tmp/fbc-consumers
nvidia-smi --query-gpu=name --format=csv,noheader
bin=build-device/dist/bin
start=$SECONDS
{
  timeout 220 "$bin/frontend_tests" --gtest_filter='*FlashAttentionTest.BlockOrders*Cuda' >"$OUT/block-orders.log" 2>&1
  echo "block orders: exit $? in $((SECONDS - start)) s"
} &
timeout 200 "$bin/backend_tests" --gtest_filter='FlashAttentionTest.*' >"$OUT/backend-flash.log" 2>&1
echo "backend flash tests: exit $?"
timeout 120 "$bin/examples_tests" --gtest_filter='Gpt2ManualMask*' >"$OUT/gpt2-mask.log" 2>&1
echo "gpt2 mask test: exit $?"
wait
grep -hE '^\[  (PASSED|FAILED) |Failure' "$OUT"/block-orders.log "$OUT"/backend-flash.log "$OUT"/gpt2-mask.log | head -20
left=$((280 - SECONDS))
for arm in "" "FUSEBOX_TUNE_FLASH_CONSUMERS=2"; do
  ((left > 40)) || break
  echo "== attention rows ${arm:-(the rule)}"
  env $arm timeout $((left / 2)) stdbuf -oL "$bin/fusebox_bench" --filter 'attention' 2>&1 | grep -E '^attention ' | cut -c1-150
  left=$((280 - SECONDS))
done
