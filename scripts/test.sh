#!/usr/bin/env bash
# Runs go vet and every test of every module in the workspace against the real services (started when down),
# then checks that the tests cover at least 80% of the core package.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services.sh

if [ -n "$(gofmt -l .)" ]; then
	echo "gofmt would change:" >&2
	gofmt -l . >&2
	exit 1
fi

profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT
core=github.com/postbox-go/postbox
go list -m -f '{{.Dir}} {{.Path}}' | while read -r dir mod; do
	echo "== $mod"
	(cd "$dir" && go vet ./... && go test -count=1 -timeout 10m -coverpkg="$core" \
		-coverprofile="$profiles/$(echo "$mod" | tr / _).out" ./...)
done

# Merge the profiles: a block of the core package is covered when any module's tests ran it.
coverage=$(awk 'FNR > 1 && $1 ~ "^'"$core"'/[^/]+\\.go:" {
	n[$1] = $2; if ($3 > 0) hit[$1] = 1
} END {
	for (b in n) { total += n[b]; if (b in hit) covered += n[b] }
	printf "%.1f", total ? 100 * covered / total : 0
}' "$profiles"/*.out)
echo "core package coverage: $coverage%"
awk -v c="$coverage" 'BEGIN { exit !(c >= 80) }' || { echo "core coverage below 80%" >&2; exit 1; }
