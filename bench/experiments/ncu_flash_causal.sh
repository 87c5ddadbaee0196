#!/usr/bin/env bash
# Nsight Compute on the bf16 flash-attention kernels at B 8, 16 heads, T 2048,
# head dim 64 (bench/NOTES.md: causal runs at 0.73x torch's SDPA where
# unmasked runs at 0.95x): fusebox's kernel unmasked and causal (one launch
# each, after the warm-up), then torch's SDPA (cuDNN) the same two ways.
# Where a causal tile's extra ~30% goes: tensor-pipe activity, issue stalls
# (barrier: the ping-pong turns; long scoreboard: TMA waits), instructions
# (the diagonal tiles' masking), waves. Not part of the build or the bench.
# On the device, from the repository root, carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/ncu_flash_causal.sh
# FUSEBOX_TUNE_* settings in the environment reach fusebox's kernels.
set -uo pipefail
source bench/experiments/unpack_dist.sh /tmp/fbc-ncu
exec > >(tee "${OUT:-/tmp}/ncu-flash.txt") 2>&1
metrics=gpu__time_duration.sum,sm__cycles_active.avg,gpc__cycles_elapsed.max,launch__grid_size
metrics+=,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active
metrics+=,smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sector_hit_rate.pct
metrics+=,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio
keep='^  [a-zA-Z_].*\(|gpu__|dram__|lts__|launch__|sm__|smsp__|gpc__'
ncu() { timeout 150 /usr/local/cuda/bin/ncu --clock-control none --cache-control all --metrics "$metrics" "$@"; }
# fusebox_bench runs the filtered cases in order, T 2048 first; each case
# launches its kernel for the first call, the warm start, the checks and the
# warm-up before the trials: the 5th launch is a warm one.
echo "=== fusebox unmasked [8, 16, 2048, 64] bf16"
ncu -k regex:fb_flash_attention_e64_bf16_none --launch-skip 4 --launch-count 1 \
  build-device/dist/bin/fusebox_bench --filter attention 2>&1 | grep -E "$keep"
echo "=== fusebox causal [8, 16, 2048, 64] bf16"
ncu -k regex:fb_flash_attention_e64_bf16_causal --launch-skip 4 --launch-count 1 \
  build-device/dist/bin/fusebox_bench --filter attention_causal 2>&1 | grep -E "$keep"
driver=$(mktemp --suffix=.py)
cat >"$driver" <<'PY'
import sys
import torch
import torch.nn.functional as F
causal = sys.argv[1] == "causal"
q, k, v = (torch.randn(8, 16, 2048, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
for _ in range(6):
    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
torch.cuda.synchronize()
PY
for how in unmasked causal; do
  echo "=== torch SDPA $how [8, 16, 2048, 64] bf16"
  ncu -k regex:'(cudnn|flash|fmha|sdpa)' --launch-skip 4 --launch-count 1 python3 "$driver" $how 2>&1 | grep -E "$keep"
done
rm -f "$driver"
