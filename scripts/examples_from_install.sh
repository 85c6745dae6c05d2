#!/usr/bin/env bash
# Installs the built convtune into a fresh prefix, builds examples/ against it as a separate CMake project
# (find_package(convtune), C++17) and runs all three examples, with the user API alone (the installed headers less
# include/convtune/extension/, the API for writing families, which is installed too); also checks the pkg-config
# files and that the installed command line finds its libraries and shipped data. Used by ctest (test
# examples_from_install).
#   scripts/examples_from_install.sh BUILD_DIR WORK_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$2
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log"
echo "installed into $prefix: $(find "$prefix" -type f | wc -l) files"
# The installed command line runs from anywhere, with its library beside it and its data under share/convtune.
(cd / && "$prefix/bin/convtune" devices >/dev/null)
listing=$(cd / && "$prefix/bin/convtune" db --db "$work/empty.json" list)
[[ "$listing" == *" shipped"* && "$listing" != *" 0 shipped"* ]] ||
  { echo "the installed convtune does not find its shipped tuning data: $listing" >&2; exit 1; }
# pkg-config knows it, and the seed networks' trainer on top of it (which requires it).
PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name convtune.pc)") pkg-config --cflags --libs convtune convtune-nn
# Both header groups are installed; the examples build against a copy of the prefix without the extension group,
# so an example that reached into it would fail here.
[[ -f "$prefix/include/convtune/convtune.h" && -f "$prefix/include/convtune/extension/kernel_family.h" ]] ||
  { echo "$prefix lacks the user API (convtune/convtune.h) or the extension API (convtune/extension/)" >&2; exit 1; }
user_prefix=$work/user-prefix
cp -a "$prefix" "$user_prefix"
rm -r "$user_prefix/include/convtune/extension"
cmake -S "$root/examples" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$user_prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$work/configure.log"
cmake --build "$work/build" >"$work/build.log"
export CONVTUNE_TUNING_DB=$work/user_tuning.json  # the examples' plans read (and example 2 writes) this one
echo "== forward_convolution"
"$work/build/forward_convolution"
echo "== tune_layer"
"$work/build/tune_layer" "$work/tuned.json"
echo "== train_step"
"$work/build/train_step"
# The Debian package holds the same files under /usr.
(cd "$build" && cpack -G DEB -B "$work/deb" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log" >&2; exit 1; }
deb=$(ls "$work"/deb/*.deb)
contents=$(dpkg-deb -c "$deb")
for want in ./usr/bin/convtune ./usr/lib/libconvtune.so.0 ./usr/lib/libconvtune_nn.so.0 \
            ./usr/include/convtune/convtune.h ./usr/include/convtune/extension/kernel_family.h \
            ./usr/lib/cmake/convtune/convtuneConfig.cmake ./usr/share/convtune/tuning/; do
  [[ "$contents" == *" $want"* ]] || { echo "$deb lacks $want" >&2; exit 1; }
done
echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
