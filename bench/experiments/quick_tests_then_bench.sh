#!/usr/bin/env bash
# One device call: the CUDA tests that attention, its recognition, the
# numerics check and the GPT-2 example touch (two binaries in parallel, the
# log in $OUT/quick-tests.log, a summary printed), then device_run.sh's
# remote-bench with FUSEBOX_BENCH_ARGS (default: the attention and GPT-2
# rows, profiled), beside PyTorch in the time left. From the repository
# root, carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/quick_tests_then_bench.sh
set -u
source bench/experiments/unpack_dist.sh /tmp/fbc-quick
nvidia-smi --query-gpu=name --format=csv,noheader
bash bench/experiments/attention_cuda_tests.sh "$OUT/quick-tests.log"
export FUSEBOX_BENCH_ARGS="${FUSEBOX_BENCH_ARGS:---filter attention,gpt2_forward --profile}"
# FUSEBOX_CALL_SHORTER_BY: seconds the call's limit is under 600.
FUSEBOX_DEVICE_SECONDS_USED=$((SECONDS + 20 + ${FUSEBOX_CALL_SHORTER_BY:-0})) bash bench/device_run.sh remote-bench >"$OUT/remote-bench.log" 2>&1
echo "remote-bench rc=$?"
grep -E '^(attention|gpt2_forward) |memory-bound kernels|ratio|x faster|torch' "$OUT/bench.log" | cut -c1-220 | head -60
