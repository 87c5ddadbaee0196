# Sourced by the experiment scripts on the device, from the repository root:
# unpacks the carried build-device/dist.tar.xz, puts its libraries on the
# loader path, gives the kernels a compile cache ($1, default /tmp/fbc) and
# points the source dir the tests were built against (their golden files,
# the kernels' #include paths) at this tree.
rm -rf build-device/dist && tar -C build-device -xJf build-device/dist.tar.xz
export LD_LIBRARY_PATH=$PWD/build-device/dist/lib FUSEBOX_CACHE_DIR=${1:-/tmp/fbc}
tests_dir="$(cat build-device/dist/source_dir.txt)"
if [[ ! -d "$tests_dir" ]]; then mkdir -p "$(dirname "$(dirname "$tests_dir")")"; ln -sfn "$PWD" "$(dirname "$tests_dir")"; fi
