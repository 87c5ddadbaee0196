#!/usr/bin/env bash
# The CUDA tests that attention, its recognition, the numerics check and the
# GPT-2 example touch: two test binaries in parallel, their output appended
# to $1, a summary printed. On the device, after unpack_dist.sh, from the
# repository root (quick_tests_then_bench.sh, causal_evidence_call.sh).
set -u
log=$1 bin=build-device/dist/bin
{
  timeout 120 "$bin/frontend_tests" \
    --gtest_filter='*Attention*Cuda*:*Flash*Cuda*:*AMaskTensor*Cuda*:*Numerics*Cuda*:*Sdpa*Cuda*' &
  timeout 120 "$bin/examples_tests" --gtest_filter='*Cuda*:Gpt2ManualMask*' &
  wait
} >>"$log" 2>&1
grep -E '^\[  (PASSED|FAILED) |^\[  FAILED  \]|Failure' "$log" | head -30
