#!/usr/bin/env bash
# Nsight Compute on fusebox's and torch.compile's kernels for the row
# workloads short of their goals (layer_norm 16384 x 4096, softmax 32768 x
# 1024): time, DRAM bytes, L1/L2 hit rates, instructions, occupancy, stalls
# (bench/NOTES.md, session 9). Not part of the build or the bench. On the
# device, from the repository root, after `bash bench/device_run.sh` here
# (carry build-device/dist):
#   bash bench/experiments/ncu_rows.sh        # layer_norm, softmax
#   bash bench/experiments/ncu_rows.sh sums   # row and column sums 8192 x 8192
#   bash bench/experiments/ncu_rows.sh outer  # softmax over dim 0, [16411, 1023] f32 (the sweep)
#   bash bench/experiments/ncu_rows.sh split  # split columns: softmax and rms_norm over dim 0, [16411, 1023]
#   bash bench/experiments/ncu_rows.sh misses # the sweep's shapes below its goals, fusebox and torch.compile
#                                             # (NCU_ONLY=regex: only the misses whose titles match)
# FUSEBOX_TUNE_* settings in the environment reach fusebox's kernels. ncu
# replays each profiled kernel with the caches flushed (no dirty lines, unlike
# the bench's zeroing) at the GPU's own clocks; the fourth launch is profiled.
set -uo pipefail
[[ -d build-device/dist ]] || (cd build-device && tar xJf dist.tar.xz)
export LD_LIBRARY_PATH=$PWD/build-device/dist/lib FUSEBOX_CACHE_DIR=/tmp/fbc
# The kernels' #include paths name the source tree the dist was built from.
src=$(dirname "$(cat build-device/dist/source_dir.txt)")
mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src" 2>/dev/null || true
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
metrics+=,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__t_sector_hit_rate.pct,launch__registers_per_thread
metrics+=,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum
metrics+=,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio
metrics+=,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio
metrics+=,launch__occupancy_limit_registers,launch__cluster_max_active_per_gpu,launch__grid_size
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.avg,gpc__cycles_elapsed.max
ncu=(/usr/local/cuda/bin/ncu --clock-control none --cache-control all --launch-skip 3 --launch-count 1 --metrics "$metrics")
keep='^  [a-z_]+.*\(|gpu__|dram__|lts__|l1tex__|launch__|sm__|smsp__'
driver=$(mktemp --suffix=.py)
cat >"$driver" <<'PY'
import sys
sys.path.insert(0, "bench")
import torch
from compare_torch import torch_workloads
name, shapes = sys.argv[1], eval(sys.argv[2])
fn = torch.compile(torch_workloads(torch)[name][0])
args = [torch.randn(s, device="cuda") for s in shapes]
for _ in range(6):
    fn(*args)
torch.cuda.synchronize()
PY
profile() {  # title, kernel regex, command...
  echo "=== $1"
  timeout 150 "${ncu[@]}" -k "regex:$2" "${@:3}" 2>&1 | grep -E "$keep"
}
if [[ ${1:-rows} == outer ]]; then
  # The held outer layout (a cluster per column tile) on softmax over dim 0;
  # FUSEBOX_TUNE_* in the environment picks a variant.
  profile "fusebox softmax dim0 [16411, 1023] f32" ^red_fused_div_exp build-device/dist/bin/fusebox_bench --sweep --filter "softmax/dim0 [16411"
  cat >"$driver" <<'PY'
import torch
fn = torch.compile(lambda x: torch.softmax(x, 0))
x = torch.randn(16411, 1023, device="cuda")
for _ in range(6):
    fn(x)
torch.cuda.synchronize()
PY
  profile "torch.compile softmax dim0 [16411, 1023] f32" triton_ python3 "$driver"
  rm -f "$driver"
  exit 0
fi
if [[ ${1:-rows} == split ]]; then
  # The split column layout (a launch per pass, split_printer.h): three
  # launches in a row of fusebox's, then torch.compile's kernels, on the
  # sweep's tallest f32 and bf16 columns. Filters cannot hold the shape's
  # comma: the kernel name picks the dtype (bf16 kernels cast).
  splits=(--launch-skip 6 --launch-count 3)
  # The whole report to $OUT too (the device tool returns only the output's tail).
  exec > >(tee "${OUT:-/tmp}/ncu-split.txt") 2>&1
  fb() {  # title, filter, kernel regex
    echo "=== fusebox $1 (3 launches)"
    timeout 80 /usr/local/cuda/bin/ncu --clock-control none --cache-control all "${splits[@]}" --metrics "$metrics" \
      -k "regex:$3" build-device/dist/bin/fusebox_bench --sweep --filter "$2" 2>&1 | grep -E "$keep"
  }
  fb "softmax dim0 [16411, 1023] f32" "softmax/dim0 [16411" "^red_fused_div_exp_max"
  fb "softmax dim0 [16411, 1023] bf16" "softmax/dim0 [16411" "^red_fused_cast_div_exp_max"
  fb "rms_norm dim0 [16411, 1023] f32" "rms_norm/dim0 [16411" "^red_fused_add_div_mul_rsqrt"
  fb "rms_norm dim0 [16411, 1023] bf16" "rms_norm/dim0 [16411" "^red_fused_add_cast_div_mul_rsqrt"
  cat >"$driver" <<'PY'
import sys
import torch
dtype = getattr(torch, sys.argv[1])
ops = {"softmax": lambda x, w: torch.softmax(x, 0),
       "rms_norm": lambda x, w: x * torch.rsqrt(torch.mean(x * x, 0, keepdim=True) + 1e-6) * w}
fn = torch.compile(ops[sys.argv[2]])
x = torch.randn(16411, 1023, device="cuda", dtype=dtype)
w = torch.randn(16411, 1, device="cuda", dtype=dtype)
for _ in range(6):
    fn(x, w)
torch.cuda.synchronize()
PY
  for dtype in float32 bfloat16; do
    for op in softmax rms_norm; do
      profile "torch.compile $op dim0 [16411, 1023] $dtype" triton_ python3 "$driver" $dtype $op
    done
  done
  rm -f "$driver"
  exit 0
fi
if [[ ${1:-rows} == misses ]]; then
  # The sweep's shapes below its goals (bench/results/*-sweep.md): every
  # launch of one fusebox call (its kernels by name, after the warm-up
  # calls) and every kernel of one torch.compile call (between
  # cudaProfilerStart and Stop), f32 unless named. Report in $OUT.
  exec > >(tee "${OUT:-/tmp}/ncu-misses.txt") 2>&1
  cat >"$driver" <<'PY'
import json, sys
sys.path.insert(0, "bench")
import torch
from compare_sweep import sweep_fn, sweep_inputs
case = json.loads(sys.argv[1])
fn = torch.compile(sweep_fn(torch, case), dynamic=False)
args = sweep_inputs(torch, case, torch.Generator(device="cuda").manual_seed(1))
for _ in range(6):
    fn(*args)
torch.cuda.synchronize()
torch.cuda.profiler.start()
fn(*args)
torch.cuda.synchronize()
torch.cuda.profiler.stop()
PY
  miss() {  # title, filter, kernel regex, launches per call, case JSON
    [[ -n ${NCU_ONLY:-} && ! $1 =~ $NCU_ONLY ]] && return
    echo "=== fusebox $1"
    timeout 80 /usr/local/cuda/bin/ncu --clock-control none --cache-control all --launch-skip $((3 * $4)) \
      --launch-count "$4" --metrics "$metrics" -k "regex:$3" \
      build-device/dist/bin/fusebox_bench --sweep --filter "$2" 2>&1 | grep -E "$keep"
    [[ -n ${NCU_FUSEBOX_ONLY:-} ]] && return
    echo "=== torch.compile $1"
    timeout 120 /usr/local/cuda/bin/ncu --clock-control none --cache-control all --profile-from-start off \
      --metrics "$metrics" python3 "$driver" "$5" 2>&1 | grep -E "$keep"
  }
  miss "sum dim0 [1031, 16273] f32" "sum/dim0 [1031" "^red_sum_0" 2 \
    '{"op": "sum", "dim": 0, "layout": "contiguous", "dtype": "float32", "shape": [1031, 16273]}'
  miss "softmax dim0 [1031, 16273] f32" "softmax/dim0 [1031" "^red_fused_div_exp_max" 2 \
    '{"op": "softmax", "dim": 0, "layout": "contiguous", "dtype": "float32", "shape": [1031, 16273]}'
  miss "layer_norm middle [33, 16411, 31] f32" "layer_norm/middle [33, 16411" "^red_fused_add_div_mul_rsqrt_sub" 3 \
    '{"op": "layer_norm", "dim": 1, "layout": "contiguous", "dtype": "float32", "shape": [33, 16411, 31]}'
  miss "rms_norm dim0 [37, 453439] bf16" "rms_norm/dim0 [37" "^red_fused_add_cast_div_mul_rsqrt" 1 \
    '{"op": "rms_norm", "dim": 0, "layout": "contiguous", "dtype": "bfloat16", "shape": [37, 453439]}'
  miss "sum dim0 [16411, 1023] bf16" "sum/dim0 [16411, 1023] bfloat16" "^red_sum_0" 2 \
    '{"op": "sum", "dim": 0, "layout": "contiguous", "dtype": "bfloat16", "shape": [16411, 1023]}'
  miss "layer_norm dim0 [16411, 1023] f32" "layer_norm/dim0 [16411, 1023] float32" "^red_fused_add_div_mul_rsqrt_sub" 3 \
    '{"op": "layer_norm", "dim": 0, "layout": "contiguous", "dtype": "float32", "shape": [16411, 1023]}'
  miss "softmax middle [33, 37, 13741] f32" "softmax/middle [33, 37, 13741] float32" "^red_fused_div_exp_max" 1 \
    '{"op": "softmax", "dim": 1, "layout": "contiguous", "dtype": "float32", "shape": [33, 37, 13741]}'
  miss "copy [4097, 4099] bf16" "copy/contiguous [4097" "^poi_copy" 1 \
    '{"op": "copy", "dim": -1, "layout": "contiguous", "dtype": "bfloat16", "shape": [4097, 4099]}'
  rm -f "$driver"
  exit 0
fi
if [[ ${1:-rows} == sums ]]; then
  # The column sum's partial kernel (red_sum_0_partial) and combine (red_sum_0) against the row sum.
  profile "fusebox row sum" per_sum build-device/dist/bin/fusebox_bench --filter row_sum
  profile "fusebox column sum, partial" red_sum_0_partial build-device/dist/bin/fusebox_bench --filter col_sum
  profile "fusebox column sum, combine" 'red_sum_0$' build-device/dist/bin/fusebox_bench --filter col_sum
  profile "torch.compile row sum" triton_ python3 "$driver" row_sum "[(8192, 8192)]"
  profile "torch.compile column sum" triton_ python3 "$driver" col_sum "[(8192, 8192)]"
  rm -f "$driver"
  exit 0
fi
profile "fusebox layer_norm" per_fused build-device/dist/bin/fusebox_bench --filter manual_layer_norm
profile "fusebox softmax 32768x1024" per_fused build-device/dist/bin/fusebox_bench --filter manual_softmax
profile "torch.compile layer_norm" triton_ python3 "$driver" manual_layer_norm "[(16384, 4096), (4096,), (4096,)]"
profile "torch.compile softmax 32768x1024" triton_ python3 "$driver" manual_softmax "[(32768, 1024)]"
rm -f "$driver"
