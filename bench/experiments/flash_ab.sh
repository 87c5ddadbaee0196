#!/usr/bin/env bash
# One device call for a flash-attention / online-exp-sum change: the GPU tests
# it touches (and the flash ones under FLASH_CONSUMERS=2), then
# fusebox_bench's gpt2_forward and attention rows from the new dist and from
# a baseline binary (an earlier commit's fusebox_bench, copied to
# build-device/baseline/ before the rebuild), then the FLASH_CONSUMERS
# experiments. Not part of the build or the bench. On the device, from the
# repository root, carrying ["build-device/dist.tar.xz", "build-device/baseline"]:
#   bash bench/experiments/flash_ab.sh
set -u
root=$PWD
tar -C build-device -xJf build-device/dist.tar.xz
export LD_LIBRARY_PATH=$root/build-device/dist/lib FUSEBOX_CACHE_DIR=/tmp/fbc
tests_dir="$(cat build-device/dist/source_dir.txt)"
if [[ ! -d "$tests_dir" ]]; then mkdir -p "$(dirname "$(dirname "$tests_dir")")"; ln -sfn "$root" "$(dirname "$tests_dir")"; fi
nvidia-smi --query-gpu=name --format=csv,noheader
filter='*Attention*:*Flash*:*Sdpa*:*CrossEntropy*:*Softmax*:*OnlineExp*:*LogSumExp*:*Logsumexp*'
t0=$SECONDS
GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=0 timeout 150 build-device/dist/bin/frontend_tests --gtest_filter="$filter" > $OUT/t_f0.log 2>&1 &
GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=1 timeout 150 build-device/dist/bin/frontend_tests --gtest_filter="$filter" > $OUT/t_f1.log 2>&1 &
timeout 150 build-device/dist/bin/examples_tests --gtest_filter='*Cuda*:*Gpu*' > $OUT/t_ex.log 2>&1 &
FUSEBOX_TUNE_FLASH_CONSUMERS=2 FUSEBOX_CACHE_DIR=/tmp/fbc2 timeout 150 build-device/dist/bin/frontend_tests --gtest_filter='*FlashAttention*Cuda*' > $OUT/t_knob2.log 2>&1 &
wait
for f in t_f0 t_f1 t_ex t_knob2; do echo "$f: $(grep -E '^\[  (PASSED|FAILED)' $OUT/$f.log | tr '\n' ' ')"; grep -E '^\[  FAILED  \]' $OUT/$f.log | head -10; done
echo "tests took $((SECONDS - t0)) s"
echo "== new bench"
timeout 170 build-device/dist/bin/fusebox_bench --filter gpt2_forward,attention --profile --json $OUT/bench.json > $OUT/bench.log 2>&1
sed -n '/^workload /,/^result: /p' $OUT/bench.log
grep -A6 "worst kernels" $OUT/bench.log | head -40
echo "== baseline bench ($((SECONDS - t0)) s)"
FUSEBOX_CACHE_DIR=/tmp/fbc0 timeout 120 build-device/baseline/fusebox_bench --filter gpt2_forward,attention > $OUT/baseline.log 2>&1
sed -n '/^workload /,/^result: /p' $OUT/baseline.log
echo "== A/B consumers 3 ($((SECONDS - t0)) s)"
FUSEBOX_TUNE_FLASH_CONSUMERS=3 timeout 70 build-device/dist/bin/fusebox_bench --filter attention > $OUT/ab3.log 2>&1
sed -n '/^workload /,/^result: /p' $OUT/ab3.log
echo "== A/B consumers 2 ($((SECONDS - t0)) s)"
FUSEBOX_TUNE_FLASH_CONSUMERS=2 timeout 70 build-device/dist/bin/fusebox_bench --filter gpt2_forward > $OUT/ab2.log 2>&1
sed -n '/^workload /,/^result: /p' $OUT/ab2.log
# The cross-entropy logsumexp rows (bf16 [8192, 50304], 58.8% of copy on the
# H100): more groups in flight per thread, or a launch bound that keeps
# 2048 threads per SM; only while the call has time left.
for v in LOOP_GROUPS=8 LOOP_MIN_BLOCKS=8; do
  if (( SECONDS - t0 > 440 )); then echo "skipped $v: out of time"; continue; fi
  echo "== CE $v ($((SECONDS - t0)) s)"
  env FUSEBOX_TUNE_$v FUSEBOX_CACHE_DIR=/tmp/fbc_$v timeout 75 build-device/dist/bin/fusebox_bench --filter gpt2_forward --profile > $OUT/ce_$v.log 2>&1
  grep -E '^(red|per)_fused_cast_(exp|div_gather)' $OUT/ce_$v.log
done
echo "== CE default"; grep -E '^(red|per)_fused_cast_(exp|div_gather)' $OUT/bench.log
echo "done at $((SECONDS - t0)) s"
