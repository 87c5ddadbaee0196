#!/usr/bin/env bash
# A/B of FUSEBOX_TUNE_* settings on sweep cases in one device call: each
# setting runs `fusebox_bench --sweep --filter FILTER` (its JSON in $OUT), then
# one table of the median ms per case and setting. Not part of the build or
# the bench. On the device, from the repository root, carrying
# build-device/dist.tar.xz (bench/device_run.sh build):
#   bash bench/experiments/ab_sweep.sh 'dim0 [16411, 1023]' '' 'FUSEBOX_TUNE_COLUMN_UNROLL=16'
# The first argument is the filter (comma-separated words, or ';'-separated
# ones where it holds a ';', to name shapes: 'softmax/dim0 [16411, 1023];rms_norm/dim0 [16411, 1023]'),
# each further one a setting ('' the defaults; several variables separated by
# spaces).
set -euo pipefail
filter=$1
shift
[[ -d build-device/dist ]] || (cd build-device && tar xJf dist.tar.xz)
export LD_LIBRARY_PATH=$PWD/build-device/dist/lib FUSEBOX_CACHE_DIR=${FUSEBOX_CACHE_DIR:-/tmp/fbc}
# The kernels' #include paths name the source tree the dist was built from.
src=$(dirname "$(cat build-device/dist/source_dir.txt)")
mkdir -p "$(dirname "$src")" && ln -sfn "$PWD" "$src" 2>/dev/null || true
out=${OUT:-/tmp/ab}
mkdir -p "$out"
i=0
for setting in "$@"; do
  # shellcheck disable=SC2086
  env $setting build-device/dist/bin/fusebox_bench --sweep --filter "$filter" --json "$out/ab$i.json" >"$out/ab$i.log" 2>&1 ||
    { echo "setting '$setting' failed:"; tail -5 "$out/ab$i.log"; }
  i=$((i + 1))
done
python3 - "$out" "$@" <<'PY'
import json, sys
out, settings = sys.argv[1], sys.argv[2:]
runs = []
for i in range(len(settings)):
    try:
        runs.append({c["name"]: c for c in json.load(open(f"{out}/ab{i}.json"))["sweep"]})
    except (OSError, ValueError):
        runs.append({})
print("| case | " + " | ".join(s or "defaults" for s in settings) + " |")
print("|---|" + "---|" * len(settings))
for name in runs[0]:
    cells = []
    for r in runs:
        c = r.get(name)
        cells.append("-" if c is None else f"{c['median_ms']:.4f}{'' if c['ok'] else ' WRONG'}")
    print(f"| {name} | " + " | ".join(cells) + " |")
PY
