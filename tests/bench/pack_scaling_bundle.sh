#!/bin/bash
# Packs the worker-scaling benchmark for the GPU machine, which has neither
# ZeroMQ nor OpenCV nor libarchive:
#
#   tests/bench/pack_scaling_bundle.sh BUILD OUT SHARD.tar...
#
# OUT gets serve-imagenet-shards and recv-throughput with every library they
# load (../shared/device-bundle; DEVICE_BUNDLE names another copy of it),
# xz-compressed: OpenCV's image codecs alone pull in about 180 MB of
# libraries, 48 MB compressed, and what travels to that machine is at most
# 64 MiB; then the shards (renamed shard-NNNNNN.tar), worker_scaling.py and
# run-scaling, which unpacks the programs there and runs the benchmark:
#
#   OUT/run-scaling [worker_scaling.py options, e.g. --workers 1,2,4,8,14 --repeat 2]
#
# With the device tool: carry OUT (inside the checkout, ignored by git, e.g.
# .device-bundle/scaling) and run `OUT/run-scaling`. The shards must fit
# beside the programs and the checkout: about 15 MB, 200 photos with
# restart markers.
set -euo pipefail
usage() {
  sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
}
(( $# >= 3 )) || usage
build=$1 out=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
bundler=${DEVICE_BUNDLE:-$here/../../../shared/device-bundle}
# Everything checked before the minutes of compression.
for program in "$build/servers/serve-imagenet-shards" "$build/tests/bench/recv-throughput"; do
  [[ -x $program ]] || { echo "no $program: build first (ninja -C $build)" >&2; exit 1; }
done
[[ -x $bundler ]] || { echo "no device-bundle at $bundler (set DEVICE_BUNDLE)" >&2; exit 1; }
for shard in "$@"; do
  [[ -f $shard && -r $shard ]] || { echo "not a readable shard: $shard" >&2; exit 1; }
done
# OUT is emptied: only a folder this script made, or a new one.
if [[ -e $out && ! -f $out/run-scaling ]]; then
  echo "$out exists and is not an earlier pack: choose a new folder" >&2
  exit 1
fi
# The checkout's tracked files travel too.
top=$(git -C "$here" rev-parse --show-toplevel)
tree=$(cd "$top" && git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
limit=$(((64 << 20) - tree))

rm -rf "$out"
mkdir -p "$out/shards"
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
"$bundler" "$staging/bundle" "$build/servers/serve-imagenet-shards" "$build/tests/bench/recv-throughput" >/dev/null
tar -C "$staging" -cf - bundle | xz -T0 -9 >"$out/bundle.tar.xz"

count=0
for shard in "$@"; do
  cp "$shard" "$(printf '%s/shards/shard-%06d.tar' "$out" "$count")"
  count=$((count + 1))
done
cp "$here/worker_scaling.py" "$out/"
cat >"$out/run-scaling" <<RUN
#!/bin/bash
# Unpacks the programs beside this script and runs worker_scaling.py on the
# shards here; arguments go to worker_scaling.py.
set -euo pipefail
here=\$(cd "\$(dirname "\$0")" && pwd)
programs=\$(mktemp -d)
trap 'rm -rf "\$programs"' EXIT
xz -dc "\$here/bundle.tar.xz" | tar -C "\$programs" -xf -
python3 "\$here/worker_scaling.py" --run "\$programs/bundle/run" \\
  --shards "\$here/shards/shard-{000000..$(printf '%06d' $((count - 1)))}.tar" "\$@"
RUN
chmod +x "$out/run-scaling"

size=$(du -sb "$out" | cut -f1)
echo "packed $count shards and the programs in $out: $((size >> 10)) KiB of the $((limit >> 10)) KiB that may travel beside the checkout"
if (( size > limit )); then
  echo "too large to travel: use fewer or smaller shards" >&2
  exit 1
fi
