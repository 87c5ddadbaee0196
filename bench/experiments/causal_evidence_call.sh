#!/usr/bin/env bash
# One device call for issue 24's two open goal rows:
# 1. the attention rows of an older build (build-device/dist-old.tar.xz,
#    when carried) and of this one, alternating, so a kernel change is
#    measured before and after in one run;
# 2. the causal head dim 64 A/B (two consumer warpgroups, 128-row blocks,
#    persistent or not; three consumers persistent) against the rule;
# 3. bench/experiments/gpt2_layer_norm.cu's row layouts for GPT-2's bf16
#    LayerNorm, when its binary is carried (build-device/experiments/);
# 4. Nsight Compute on the causal kernel against the unmasked one and
#    cuDNN's (ncu_flash_causal.sh), then on GPT-2's bf16 LayerNorm kernels
#    (ncu_gpt2_norms.sh), in the time left.
# FUSEBOX_EVIDENCE_TAIL=bench: where only one call may come, the CUDA
# attention and GPT-2 tests first (attention_cuda_tests.sh), one round
# of 1, and instead of 4 device_run.sh's remote-bench of the attention and
# GPT-2 rows, profiled, beside PyTorch in the time left.
# From the repository root, carrying ["build-device/dist.tar.xz",
# "build-device/dist-old.tar.xz", "build-device/experiments"]:
#   bash bench/experiments/causal_evidence_call.sh
# $OUT: attention-before-after.log, causal-ab.log, gpt2-layer-norm.log,
# ncu-flash.txt, ncu-norms.txt.
set -uo pipefail
source bench/experiments/unpack_dist.sh /tmp/fbc-evidence
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader
rows='^attention'
tail_mode=${FUSEBOX_EVIDENCE_TAIL:-ncu} rounds="1 2"
# Logs: one each, or all in evidence.log where remote-bench's files join them
# (the tool brings back 8 files).
log_tests=$OUT/quick-tests.log log_ba=$OUT/attention-before-after.log log_ab=$OUT/causal-ab.log
log_ln=$OUT/gpt2-layer-norm.log
if [[ $tail_mode == bench ]]; then
  rounds=1 log_tests=$OUT/evidence.log log_ba=$OUT/evidence.log log_ab=$OUT/evidence.log log_ln=$OUT/evidence.log
  bash bench/experiments/attention_cuda_tests.sh "$log_tests"
fi
if [[ -f build-device/dist-old.tar.xz ]]; then
  rm -rf /tmp/old && mkdir -p /tmp/old && tar -C /tmp/old -xJf build-device/dist-old.tar.xz
  {
    for round in $rounds; do
      echo "== round $round: old build"
      LD_LIBRARY_PATH=/tmp/old/dist/lib FUSEBOX_CACHE_DIR=/tmp/fbc-old timeout 100 \
        /tmp/old/dist/bin/fusebox_bench --filter attention 2>&1 | grep -E "$rows"
      echo "== round $round: this build"
      timeout 100 build-device/dist/bin/fusebox_bench --filter attention 2>&1 | grep -E "$rows"
    done
  } 2>&1 | tee -a "$log_ba"
fi
settings=(FUSEBOX_TUNE_FLASH_CONSUMERS=2 "FUSEBOX_TUNE_FLASH_CONSUMERS=2 FUSEBOX_TUNE_FLASH_PERSISTENT=1"
  FUSEBOX_TUNE_FLASH_PERSISTENT=2 "")
[[ $tail_mode == bench ]] && settings=(FUSEBOX_TUNE_FLASH_CONSUMERS=2)  # the rule's rows: the before/after's
{
  for setting in "${settings[@]}"; do
    echo "== ${setting:-the rule}"
    # Line-buffered: a run the timeout ends still shows the rows it printed
    # (on 2026-12-07 the two-consumer arm printed nothing within 60 s).
    # shellcheck disable=SC2086  # word splitting of the settings is wanted
    timeout 90 env $setting stdbuf -oL build-device/dist/bin/fusebox_bench --filter attention_causal 2>&1 | grep -E "$rows"
  done
} 2>&1 | tee -a "$log_ab"
if [[ -x build-device/experiments/gpt2_layer_norm ]]; then
  timeout 60 build-device/experiments/gpt2_layer_norm 2>&1 | tee -a "$log_ln"
fi
if [[ $tail_mode == bench ]]; then
  echo "== ${SECONDS} s in: remote-bench"
  FUSEBOX_BENCH_ARGS="--filter attention,gpt2_forward --profile" FUSEBOX_DEVICE_SECONDS_USED=$((SECONDS + 20)) \
    bash bench/device_run.sh remote-bench >>"$OUT/evidence.log" 2>&1
  echo "remote-bench rc=$?"
  grep -E '^(attention|gpt2_forward) |memory-bound kernels|ratio|x faster|torch' "$OUT/bench.log" | cut -c1-220 | head -60
  exit 0
fi
echo "== ${SECONDS} s in: ncu of the flash kernels"
((SECONDS < 330)) && bash bench/experiments/ncu_flash_causal.sh >/dev/null 2>&1
grep -E '^===|gpu__time|gmma|barrier|long_score|inst_executed.sum' "$OUT/ncu-flash.txt" 2>/dev/null | head -60
echo "== ${SECONDS} s in: ncu of GPT-2's LayerNorm kernels"
((SECONDS < 380)) && timeout $((560 - SECONDS)) bash bench/experiments/ncu_gpt2_norms.sh >/dev/null 2>&1
grep -E '^===|gpu__time|dram__throughput' "$OUT/ncu-norms.txt" 2>/dev/null | head -40
echo "== done at ${SECONDS} s"
