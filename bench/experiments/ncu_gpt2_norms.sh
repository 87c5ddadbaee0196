#!/usr/bin/env bash
# Nsight Compute on GPT-2 small's bf16 LayerNorm kernels (B 8, T 1024: rows of
# 768, 25 MB each; the forward's profile puts them at 68-70% of the 1 GiB
# copy's bandwidth, bench/NOTES.md) beside a copy of the same bytes and
# torch's own layer_norm on the same rows. What it answers: the kernel's own
# duration (gpu__time_duration, no event around it) against the profiler's
# event-timed one, its DRAM throughput, and how far a copy of that size gets.
# Not part of the build or the bench. On the device, from the repository
# root, carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/ncu_gpt2_norms.sh
set -uo pipefail
source bench/experiments/unpack_dist.sh /tmp/fbc-ncu-norms
exec > >(tee "${OUT:-/tmp}/ncu-norms.txt") 2>&1
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,launch__grid_size,launch__block_size,launch__registers_per_thread,smsp__inst_executed.sum
metrics+=,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,sm__cycles_active.avg
keep='^  [a-zA-Z_].*\(|gpu__|dram__|lts__|launch__|sm__|smsp__'
# Caches as the forward leaves them (the GEMM before wrote the rows): not flushed.
ncu() { timeout 200 /usr/local/cuda/bin/ncu --clock-control none --cache-control none --metrics "$metrics" "$@"; }
# The bf16 SDPA row alone (--filter by label and dtype): skip its first
# calls' LayerNorms (compile, warm start, checks), take 3.
echo "=== fusebox GPT-2 bf16 LayerNorm kernels (residual stream -> normalized rows)"
# Each generated kernel under its own name (else all read fusebox_kernel).
FUSEBOX_UNIQUE_KERNEL_NAMES=1 ncu -k regex:per_fused_add_cast_div_mul_rsqrt_sub_sum --launch-skip 60 --launch-count 3 \
  build-device/dist/bin/fusebox_bench --filter "gpt2_forward SDPA bfloat16" 2>&1 | grep -E "$keep"
driver=$(mktemp --suffix=.py)
cat >"$driver" <<'PY'
import torch
import torch.nn.functional as F
x = torch.randn(8192, 768, device="cuda", dtype=torch.bfloat16)
w, b = torch.randn(768, device="cuda", dtype=torch.bfloat16), torch.randn(768, device="cuda", dtype=torch.bfloat16)
y = torch.empty_like(x)
for _ in range(6):
    torch.mul(x, 1, out=y)  # a kernel (copy_ of one dtype is a memcpy, which ncu does not profile)
for _ in range(6):
    F.layer_norm(x, (768,), w, b)
torch.cuda.synchronize()
PY
echo "=== torch mul(x, 1) [8192, 768] bf16 (a copy: 25 MB read + write)"
ncu -k regex:'copy|elementwise' --launch-skip 4 --launch-count 1 python3 "$driver" 2>&1 | grep -E "$keep"
echo "=== torch F.layer_norm [8192, 768] bf16"
ncu -k regex:'layer_norm|LayerNorm' --launch-skip 4 --launch-count 1 python3 "$driver" 2>&1 | grep -E "$keep"
rm -f "$driver"
