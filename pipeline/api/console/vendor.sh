#!/usr/bin/env bash
# Refreshes the console's vendored libraries (vendor/) from npm, without
# make: the built files are committed, so `go build` needs no npm.
# Usage: pipeline/api/console/vendor.sh   (edit the versions below first)
# Then update the table in NOTICE.md and check the console in a browser
# (go test -run TestConsole ./e2e).
set -euo pipefail
PREACT=11.2.0   # MIT          https://preactjs.com
HTM=3.1.1       # Apache-2.0   https://github.com/developit/htm
UPLOT=1.6.32    # MIT          https://github.com/leeoniya/uPlot

dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
for p in "preact@$PREACT" "htm@$HTM" "uplot@$UPLOT"; do
	npm pack --silent "$p" >/dev/null
done
for t in *.tgz; do
	mkdir "${t%.tgz}" && tar -xzf "$t" -C "${t%.tgz}" --strip-components=1
done
out="$dir/vendor"
rm -rf "$out" && mkdir -p "$out"
cp "preact-$PREACT/dist/preact.mjs" "$out/preact.js"
# hooks import the bare name "preact": point it at the file beside it.
sed 's/from"preact"/from".\/preact.js"/g' "preact-$PREACT/hooks/dist/hooks.mjs" >"$out/preact-hooks.js"
cp "preact-$PREACT/LICENSE" "$out/LICENSE.preact"
cp "htm-$HTM/dist/htm.module.js" "$out/htm.js"
cp "htm-$HTM/LICENSE" "$out/LICENSE.htm"
cp "uplot-$UPLOT/dist/uPlot.esm.js" "$out/uPlot.js"
cp "uplot-$UPLOT/dist/uPlot.min.css" "$out/uPlot.css"
cp "uplot-$UPLOT/LICENSE" "$out/LICENSE.uplot"
# Source-map comments point at files we do not ship.
sed -i '/^\/\/# sourceMappingURL=/d' "$out"/*.js
echo "vendored preact $PREACT, htm $HTM, uPlot $UPLOT into $out"
