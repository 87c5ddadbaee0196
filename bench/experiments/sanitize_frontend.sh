#!/usr/bin/env bash
# compute-sanitizer on what remote-check's sanitizer pass never finishes in
# one call: frontend_tests' GPU tests under memcheck in many shards at once,
# then racecheck (shared memory) on the flash-attention tests and on
# racecheck_mbarrier.cu (whether racecheck follows mbarrier handoffs). Correctness
# only: the shards share the GPU. On the device, from the repository root,
# carrying ["build-device/dist.tar.xz"]:
#   bash bench/experiments/sanitize_frontend.sh [seconds, default 330]
# Writes $OUT/sanitize-frontend.log: each shard's last lines and exit code
# (9: an error found; 124: out of time; 0: clean).
set -uo pipefail
source bench/experiments/unpack_dist.sh /tmp/fbc-sanitize
budget=${1:-330}
sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
bin=build-device/dist/bin
logs=/tmp/fusebox-sanitize-frontend
rm -rf "$logs" && mkdir -p "$logs"
exec >"${OUT:-/tmp}/sanitize-frontend.log" 2>&1

# $1 tool, $2 binary, $3 filter, $4 shards, $5 seconds.
check() {
  local i
  for ((i = 0; i < $4; ++i)); do
    (
      GTEST_TOTAL_SHARDS=$4 GTEST_SHARD_INDEX=$i timeout "$5" "$sanitizer" --tool "$1" --report-api-errors no \
        --error-exitcode 9 "$bin/$2" --gtest_filter="$3" --gtest_brief=1 >"$logs/$1.$2.$i.log" 2>&1
      echo "exit $?" >>"$logs/$1.$2.$i.log"
    ) &
  done
}

# The caching allocator keeps its blocks to the end (no leak check); the
# errors tests provoke on purpose (out of memory, a missing symbol) are API
# errors, not reported.
check memcheck frontend_tests '*Cuda*:*Gpu*:*GPU*:*cuda*:*OnTheGpu*' 12 $((budget * 2 / 3))
wait
# Whether racecheck follows an mbarrier handoff at all (racecheck_mbarrier.cu).
nvcc="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
(
  "$nvcc" -O3 -std=c++17 -arch=sm_90a bench/experiments/racecheck_mbarrier.cu -o /tmp/racecheck_mbarrier &&
    timeout 60 "$sanitizer" --tool racecheck /tmp/racecheck_mbarrier
  echo "exit $?"
) >"$logs/racecheck.mbarrier.log" 2>&1 &
check racecheck frontend_tests '*Attention*Cuda*:*Sdpa*Cuda*:*Flash*Cuda*' 4 $((budget / 3))
check racecheck backend_tests '*Flash*' 2 $((budget / 3))
wait
for f in "$logs"/*.log; do
  echo "==== $(basename "$f" .log)"
  tail -n 12 "$f"
done
