#!/usr/bin/env bash
# Runs fusebox's GPU tests and its main job (fusebox_bench) on the H200 that the
# `device` tool lends, the same way every session (see /work/shared/DEVICE.md).
#
# 1. Here (no GPU needed), from the repository root:
#      bench/device_run.sh            # = bench/device_run.sh build
#    builds a Release tree in build-device/ and packs build-device/dist/:
#      bin/   fusebox_bench and every test binary, stripped
#      lib/   the shared libraries the device lacks (Abseil, spdlog, fmt,
#             OpenBLAS with its libgfortran and libquadmath, ~40 MB), as
#             `ldd` names them (run with LD_LIBRARY_PATH: a RUNPATH is not enough)
#      source_dir.txt   the absolute source dir the tests were built against
#    and checks that dist/ fits in the 64 MiB the tool carries.
# 2. Then call the device tool's `run` with exactly:
#      command:   bash bench/device_run.sh remote
#      carry:     ["build-device/dist.tar.xz"]  (dist/, packed)
#      timeout_s: 600
#    On the device this runs fusebox_bench alone first (clean timings), then all
#    test binaries in parallel, then, where python3 has torch with a GPU,
#    bench/compare_torch.py on bench.json (PyTorch eager, built-in and
#    torch.compile on the same shapes, in the time left); logs and results
#    land in $OUT (7 files; the tool brings back 8 at most):
#      bench.log  bench.json  tests.log  device.txt
#      <date>-<machine>.md .png .json   (compare_torch.py; its log is appended
#                                        to bench.log)
#    `remote-bench` does the same without the tests (a cheaper call when only
#    the numbers are wanted), `remote-tests` runs the tests alone;
#    `remote-check` runs the tests, differential fuzz campaigns on CUDA and
#    on the CPU (fuzz-cuda.log, fuzz-cpu.log: disjoint seed ranges, as many
#    programs as fit, half of the slots with --data-movement) and the GPU tests under compute-sanitizer memcheck and
#    racecheck (sanitizer.log), no bench; FUSEBOX_BENCH_ARGS="--filter mlp --profile"
#    before it passes flags to fusebox_bench (then compare_torch.py compares
#    those cases only). Commit the .md and .png under bench/results/.
#    It exits non-zero when the bench, a test binary or the comparison fails.
set -euo pipefail
# A script that spent part of the device call before this one says how much
# (FUSEBOX_DEVICE_SECONDS_USED), so the comparison's time budget stays true.
SECONDS=${FUSEBOX_DEVICE_SECONDS_USED:-0}

mode="${1:-build}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build=build-device
dist="$build/dist"

build_here() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release
  cmake --build "$build"
  rm -rf "$dist"
  mkdir -p "$dist/bin" "$dist/lib"
  cp "$build/bench/fusebox_bench" "$dist/bin/"
  find "$build/tests" -maxdepth 1 -type f -executable \( -name '*_tests' -o -name fusebox_fuzz \) -exec cp {} "$dist/bin/" \;
  strip --strip-unneeded "$dist"/bin/*
  # The libraries the device lacks: every Abseil, spdlog, fmt and OpenBLAS
  # (with gfortran and quadmath, which it needs) library that
  # ldd resolves for any binary (NVRTC, libstdc++ and libc are there).
  local lib
  for lib in $(ldd "$dist"/bin/* | awk '$3 ~ /^\// && $1 ~ /^lib(absl_|spdlog|fmt|gtest|gmock|openblas|gfortran|quadmath)/ {print $3}' | sort -u); do
    cp -L "$lib" "$dist/lib/"
  done
  echo "$root/tests" >"$dist/source_dir.txt"
  # One compressed archive travels (the device tool carries 64 MiB in all);
  # remote modes unpack it.
  tar -C "$build" -cJf "$build/dist.tar.xz" dist
  local size_kib
  size_kib=$(du -sk "$build/dist.tar.xz" | cut -f1)
  echo "packed $build/dist.tar.xz: $(ls "$dist/bin" | wc -l) binaries, $(ls "$dist/lib" | wc -l) libraries, ${size_kib} KiB"
  if ((size_kib > 60 * 1024)); then
    echo "error: $build/dist.tar.xz is over 60 MiB; the device tool carries 64 MiB in all" >&2
    exit 1
  fi
  echo 'next: device run with command "bash bench/device_run.sh remote", carry ["build-device/dist.tar.xz"], timeout_s 600'
}

# $1: "all" (bench and tests), "bench" or "tests".
run_remote() {
  : "${OUT:?remote mode runs on the device machine, where the tool sets OUT}"
  # The archive is what was carried: unpack it over any dist/ an earlier call left.
  if [[ -f $build/dist.tar.xz ]]; then rm -rf "$dist" && tar -C "$build" -xJf "$build/dist.tar.xz"; fi
  export LD_LIBRARY_PATH="$root/$dist/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export FUSEBOX_CACHE_DIR=/tmp/fusebox-cache
  # The tests read golden files from the absolute source dir they were built
  # against; where this copy of the tree lives elsewhere, point that path here.
  local tests_dir
  tests_dir="$(cat "$dist/source_dir.txt")"
  if [[ ! -d "$tests_dir" ]]; then
    mkdir -p "$(dirname "$(dirname "$tests_dir")")"
    ln -sfn "$root" "$(dirname "$tests_dir")"
  fi

  {
    date -u
    uname -a
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
      --format=csv || true
    nproc
  } >"$OUT/device.txt" 2>&1

  local status=0
  [[ $1 == none ]] && return 0
  [[ $1 == tests ]] || run_bench || status=1
  [[ $1 == bench ]] || run_tests || status=1
  return $status
}

# fusebox_bench into bench.log and bench.json, then the A/B settings.
run_bench() {
  local status=0
  # FUSEBOX_BENCH_ARGS: more flags for this run (e.g. "--filter mlp --profile").
  echo "== fusebox_bench ${FUSEBOX_BENCH_ARGS:-}"
  # shellcheck disable=SC2086  # word splitting of the flags is wanted
  "$dist/bin/fusebox_bench" --json "$OUT/bench.json" ${FUSEBOX_BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" || status=1
  # A/B runs of tuning switches, appended to bench.log (docs/debugging.md):
  # FUSEBOX_AB="NAME=value ...[@word,...];..." runs fusebox_bench once per
  # `;`-separated setting, on the cases the words after `@` name (else those
  # of FUSEBOX_AB_FILTER, else those of FUSEBOX_BENCH_ARGS's --filter, else
  # all), with the flags of FUSEBOX_AB_ARGS (--sweep: the words name sweep
  # rows, "softmax/dim0,262147]").
  if [[ -n ${FUSEBOX_AB:-} ]]; then
    local setting vars filter main_filter=""
    # shellcheck disable=SC2086  # word splitting of the flags is wanted
    set -- ${FUSEBOX_BENCH_ARGS:-}
    while (($#)); do
      if [[ $1 == --filter && $# -ge 2 ]]; then main_filter=$2; fi
      shift
    done
    IFS=';' read -ra settings <<<"$FUSEBOX_AB"
    for setting in "${settings[@]}"; do
      vars="${setting%%@*}"
      filter="${FUSEBOX_AB_FILTER:-$main_filter}"
      [[ $setting == *@* ]] && filter="${setting#*@}"
      echo "== A/B: $vars (--filter ${filter:-all})" | tee -a "$OUT/bench.log"
      # shellcheck disable=SC2086  # word splitting of the flags is wanted
      env $vars "$dist/bin/fusebox_bench" ${FUSEBOX_AB_ARGS:-} ${filter:+--filter "$filter"} 2>&1 | tee -a "$OUT/bench.log" || status=1
    done
  fi
  return $status
}

# The GPU tests: every test binary in parallel, each split into gtest shards
# (frontend_tests alone outgrew one 420 s process), one log per shard,
# gathered into tests.log, and a summary line per shard. FUSEBOX_SHARD_SECONDS
# (default 420) bounds each shard, so a call shorter than 600 s still
# gathers the logs.
run_tests() {
  local status=0 shards=3
  echo "== tests (in parallel, $shards shards per binary, one log each, gathered into tests.log)"
  local logs=/tmp/fusebox-test-logs t name i
  rm -rf "$logs"
  mkdir -p "$logs"
  declare -A pids
  declare -A binary shard_count
  for t in "$dist"/bin/*_tests; do
    # frontend_tests holds half the tests: more, shorter shards.
    local n=$shards
    [[ $(basename "$t") == frontend_tests ]] && n=$((2 * shards))
    for ((i = 0; i < n; ++i)); do
      name="$(basename "$t").$i"
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "${FUSEBOX_SHARD_SECONDS:-420}" "$t" >"$logs/$name.log" 2>&1 &
      pids[$name]=$!
      binary[$name]=$t shard_count[$name]=$n
    done
  done
  : >"$OUT/tests.log"
  local summary=""
  for name in $(printf '%s\n' "${!pids[@]}" | sort); do
    local rc=0
    wait "${pids[$name]}" || rc=$?
    { echo "==== $name (exit $rc)"; cat "$logs/$name.log"; } >>"$OUT/tests.log"
    summary+="$(printf '%-18s exit %-3s %s' "$name" "$rc" "$(grep -E '^\[  (PASSED|FAILED) ' "$logs/$name.log" | tr '\n' ' ')")"$'\n'
    if ((rc == 124)); then
      # Out of time: the test it was in, and how many of the shard's never started.
      local listed started
      # (--gtest_list_tests lists every shard's: gtest gives shard k the tests k, k + n, ...)
      listed=$("${binary[$name]}" --gtest_list_tests | awk '/^[^ ]/ {suite = $1} /^  / {print suite $1}' |
        awk -v n="${shard_count[$name]}" -v k="${name##*.}" '(NR - 1) % n == k' || true)
      started=$(grep -oE '^\[ RUN      \] [^ ]+' "$logs/$name.log" | awk '{print $4}' || true)
      summary+="  out of time in $(echo "$started" | tail -1); not started: $(comm -23 <(sort <<<"$listed") <(sort <<<"$started") | wc -l) of $(wc -l <<<"$listed")"$'\n'
    fi
    ((rc == 0)) || status=1
  done
  # gtest's closing lists: one line per failed or skipped test, without a time.
  grep -E '^\[  (FAILED  |SKIPPED )\] [^ ]+$' "$OUT/tests.log" | sort -u | head -40 || true
  printf '%s' "$summary"
  return $status
}

# compare_torch.py on $OUT/bench.json, if python3 has torch and sees the GPU,
# within what is left of the tool's 600 s.
run_compare() {
  local left=$((570 - SECONDS))
  echo "== compare_torch.py (PyTorch beside bench.json; ${left} s left)" | tee -a "$OUT/bench.log"
  if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    echo "python3 has no torch that sees a GPU here: comparison skipped" | tee -a "$OUT/bench.log"
    return 0
  fi
  if ((left < 60)); then
    echo "too little time left: comparison skipped (run bench/device_run.sh remote-bench)" | tee -a "$OUT/bench.log"
    return 1
  fi
  PYTHONUNBUFFERED=1 timeout "$left" python3 bench/compare_torch.py --fusebox-json "$OUT/bench.json" --out "$OUT" \
    2>&1 | tee -a "$OUT/bench.log"
}

# A fuzz run on the GPU (fuzz.log) and the GPU tests under compute-sanitizer
# (sanitizer.log), beside the tests: correctness only, so sharing the GPU is fine.
run_checks() {
  local status=0
  # Fuzz campaigns (fuzz-cuda.log, fuzz-cpu.log): FUSEBOX_FUZZ_SLOTS processes
  # per device, each running chunks of FUSEBOX_FUZZ_CHUNK programs from its own
  # seed range until 500 s into the call.
  fuzz_campaign cuda "${FUSEBOX_FUZZ_SLOTS:-8}" &
  local cuda_pid=$!
  fuzz_campaign cpu "${FUSEBOX_FUZZ_CPU_SLOTS:-4}" &
  local cpu_pid=$!
  local sanitizer
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  run_tests || status=1
  (
    # GPU tests only: each binary's CUDA suites, memcheck then racecheck
    # (shared memory). Each tool takes half the time left, its binaries in
    # parallel (frontend_tests in shards, as the tests run), so one slow
    # binary no longer leaves the others unchecked.
    local filter='*Cuda*:*Gpu*:*GPU*:*cuda*:*OnTheGpu*'
    local end=540  # seconds into the call, as budget
    local logs=/tmp/fusebox-sanitizer-logs
    rm -rf "$logs" && mkdir -p "$logs"
    for tool in memcheck racecheck; do
      local share=1
      [[ $tool == memcheck ]] && share=2
      local left=$(((end - SECONDS) / share))
      ((left > 5)) || { echo "==== $tool: no time left"; continue; }
      local jobs=() t name shards i
      for t in "$dist"/bin/*_tests; do
        [[ $(basename "$t") == fuzz_tests ]] && continue
        shards=1
        [[ $(basename "$t") == frontend_tests ]] && shards=3
        for ((i = 0; i < shards; ++i)); do
          name="$tool.$(basename "$t").$i"
          # The caching allocator keeps its blocks to the end (no leak check);
          # the driver errors tests provoke on purpose (an out-of-memory
          # allocation, a missing symbol) are not memory errors.
          (
            GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$left" "$sanitizer" --tool "$tool" \
              --report-api-errors no --error-exitcode 9 "$t" --gtest_filter="$filter" --gtest_brief=1 >"$logs/$name.log" 2>&1
            echo "exit $?" >>"$logs/$name.log"
          ) &
          jobs+=("$name")
        done
      done
      wait
      for name in "${jobs[@]}"; do
        echo "==== $name"
        # 255 with no API call: a binary whose GPU tests all skip; 124: out of time.
        tail -25 "$logs/$name.log"
      done
    done
  ) >"$OUT/sanitizer.log" 2>&1 &
  local san_pid=$!
  wait "$cuda_pid" "$cpu_pid" || true
  local d
  for d in cuda cpu; do
    echo "== fuzz on $d: $(grep -c '^programs:' "$OUT/fuzz-$d.log") chunks, $(awk '/^programs:/ {n += $2} END {print n + 0}' "$OUT/fuzz-$d.log") programs, $(awk '/^findings:/ {n += $2} END {print n + 0}' "$OUT/fuzz-$d.log") findings"
    grep -E '^  [a-z-]+ +clean' "$OUT/fuzz-$d.log" | awk '{c[$1] += $3} END {for (m in c) printf "  %s clean %d\n", m, c[m]}'
    grep -m 20 '^FINDING' "$OUT/fuzz-$d.log" || true
    grep -q '^FINDING' "$OUT/fuzz-$d.log" && status=1
  done
  wait "$san_pid" || true
  echo "== compute-sanitizer (exit codes; 9: errors found)"
  # A line a job: tool.binary.shard, its error summary, its exit.
  awk '/^==== / {if (n) print n " | " e " | " x; n = $2; e = "-"; x = "-"}
       /ERROR SUMMARY/ {e = $0; sub(/^=+ /, "", e)} /^exit / {x = $0}
       END {if (n) print n " | " e " | " x}' "$OUT/sanitizer.log" | head -40
  grep -qE 'ERROR SUMMARY: [1-9]|^exit 9$' "$OUT/sanitizer.log" && status=1
  return $status
}

# $1 device, $2 processes: chunks of fusebox_fuzz over disjoint seed ranges
# (slot i, chunk k: seeds from 1 + i * 10^6 + k * chunk) until 500 s into the call.
# Every FUSEBOX_FUZZ_MOVE_EVERY-th slot (default 2: slots 1, 3, ...; 0: none)
# also generates data movement (--data-movement: gather, index_select, cat,
# stack, split, chunk), so half the campaign covers the indirect and masked loads.
fuzz_campaign() {
  local device=$1 slots=$2 chunk=${FUSEBOX_FUZZ_CHUNK:-200} every=${FUSEBOX_FUZZ_MOVE_EVERY:-2} i
  : >"$OUT/fuzz-$device.log"
  for ((i = 0; i < slots; ++i)); do
    (
      local k=0 seed moves=() tune=()
      if ((every > 0 && i % every == every - 1)); then moves=(--data-movement); fi
      # One CUDA slot in four splits every multi-pass column reduction (the
      # rule splits only large ones, which the fuzzer's shapes are not).
      if [[ $device == cuda ]] && ((i % 4 == 2)); then tune=(FUSEBOX_TUNE_OUTER_SPLIT=2); fi
      while ((SECONDS < 440)); do
        seed=$((1 + i * 1000000 + k * chunk + ${FUSEBOX_FUZZ_SEED:-0}))
        env ${tune[@]+"${tune[@]}"} timeout $((500 - SECONDS)) "$dist/bin/fusebox_fuzz" --device "$device" \
          --seed "$seed" --count "$chunk" --minimize ${moves[@]+"${moves[@]}"} ${FUSEBOX_FUZZ_ARGS:-} \
          >"/tmp/fuzz-$device-$i.log" 2>&1
        # A chunk cut by the timeout printed no summary: whole chunks count.
        # A clean chunk adds its summary; one with findings all it printed.
        if grep -q '^findings: 0$' "/tmp/fuzz-$device-$i.log"; then
          grep -E '^(programs:|  [a-z-]+ +clean|findings:)' "/tmp/fuzz-$device-$i.log" >>"$OUT/fuzz-$device.log"
        elif grep -q '^findings:' "/tmp/fuzz-$device-$i.log"; then
          echo "slot $i (seed $seed, ${tune[*]:-default tuning}):" >>"$OUT/fuzz-$device.log"
          grep -vE '^\[' "/tmp/fuzz-$device-$i.log" >>"$OUT/fuzz-$device.log"
        fi
        k=$((k + 1))
      done
    ) &
  done
  wait
}

summary() {
  local status=$1
  if [[ -f $OUT/bench.log ]]; then
    echo "== fusebox_bench (again, from bench.log)"
    sed -n '/^workload /,/^result: /p' "$OUT/bench.log"
  fi
  local md
  for md in "$OUT"/*.md; do
    [[ -f $md ]] || continue
    echo "== PyTorch beside fusebox ($(basename "$md")), median ms"
    sed -n '/^## Median time/,/^## GB/p' "$md" | sed '$d'
  done
  echo "== result: $([[ $status == 0 ]] && echo OK || echo FAILED)"
  return "$status"
}

case "$mode" in
  build) build_here ;;
  remote-check)
    status=0
    run_remote none || status=1
    run_checks || status=1
    summary $status
    ;;
  remote | remote-bench | remote-tests)
    status=0
    what=all
    [[ $mode == remote-bench ]] && what=bench
    [[ $mode == remote-tests ]] && what=tests
    run_remote "$what" || status=1
    if [[ -f $OUT/bench.json ]]; then run_compare || status=1; fi
    summary $status
    ;;
  *)
    echo "usage: bench/device_run.sh [build|remote|remote-bench|remote-tests]" >&2
    exit 2
    ;;
esac
