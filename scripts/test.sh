#!/usr/bin/env bash
# Runs go vet and every test of every module in the workspace against the real services (started when down), a
# short run of every fuzzer, then checks that the tests cover at least 80% of the core package.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/services.sh
scripts/chromium.sh
scripts/aws/emulators.sh >/dev/null # the SQS server the sqsbroker and CLI tests start
scripts/polyglot.sh

if [ -n "$(gofmt -l .)" ]; then
	echo "gofmt would change:" >&2
	gofmt -l . >&2
	exit 1
fi

# staticcheck, pinned, built from the module proxy into a cache of its own so that a new machine gets the same one.
STATICCHECK_VERSION=v0.8.2
tools=${POSTBOX_TOOLS:-$HOME/.cache/postbox-tools}
staticcheck=$tools/staticcheck-$STATICCHECK_VERSION
if [ ! -x "$staticcheck" ]; then
	mkdir -p "$tools"
	GOBIN="$tools/bin" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
	mv "$tools/bin/staticcheck" "$staticcheck"
fi

profiles=$(mktemp -d)
trap 'rm -rf "$profiles"' EXIT
core=github.com/postbox-go/postbox
started=$SECONDS
go list -m -f '{{.Dir}} {{.Path}}' | while read -r dir mod; do
	echo "== $mod"
	t0=$SECONDS
	(cd "$dir" && go vet ./... && "$staticcheck" ./...)
	# The fault suite runs its scenarios one after another (but the partial-failure ones, two at a time): it gets
	# longer than the other modules.
	timeout=10m
	if [ "$mod" = "$core/chaos" ]; then timeout=20m; fi
	args=(-count=1 -timeout "$timeout" -coverpkg="$core" -coverprofile="$profiles/$(echo "$mod" | tr / _).out" ./...)
	if [ "$mod" != "$core/chaos" ]; then
		(cd "$dir" && go test "${args[@]}")
		echo "-- $mod: $((SECONDS - t0))s"
		continue
	fi
	# The fault suite's ledger lines are its evidence: print them (and each scenario's verdict), and everything
	# when it fails.
	log="$profiles/chaos.log"
	if (cd "$dir" && go test -v "${args[@]}") >"$log" 2>&1; then
		grep -E 'events committed, |lost=[0-9]+ duplicates_published=|^--- |^(ok|PASS)' "$log"
	else
		cat "$log"
		exit 1
	fi
	echo "-- $mod: $((SECONDS - t0))s"
done
echo "-- every module: $((SECONDS - started))s"

# ---- deploy: the image's static build, the Helm chart, the alert rules and the dashboard's metrics -----------
# (scripts/deploy-check.sh, a module of its own outside go.work; its first run builds the pinned helm and compiles
# the tests' Kubernetes and Prometheus dependencies, each step timed)
t0=$SECONDS
STATICCHECK="$staticcheck" scripts/deploy-check.sh
echo "-- deploy checks: $((SECONDS - t0))s"
# ---- end deploy ----------------------------------------------------------------------------------------------

# The consumer check: every module packed at the version the modules require each other at, served by a module
# proxy of its own, and used from fresh modules outside the workspace the way the README tells users to (go get,
# go mod tidy, go vet, go build); it checks what lands in their go.sum and each published module's requirement
# graph, and builds two adapters on their own.
echo "== consumer check"
t0=$SECONDS
go run ./internal/consumercheck
echo "-- consumer check: $((SECONDS - t0))s"

# A short run of every fuzzer (make fuzz runs them longer); an input that fails is kept under testdata/fuzz.
FUZZTIME=${FUZZTIME:-5000x} scripts/fuzz.sh

# Merge the profiles: a block of the core package is covered when any module's tests ran it.
coverage=$(awk 'FNR > 1 && $1 ~ "^'"$core"'/[^/]+\\.go:" {
	n[$1] = $2; if ($3 > 0) hit[$1] = 1
} END {
	for (b in n) { total += n[b]; if (b in hit) covered += n[b] }
	printf "%.1f", total ? 100 * covered / total : 0
}' "$profiles"/*.out)
echo "core package coverage: $coverage%"
awk -v c="$coverage" 'BEGIN { exit !(c >= 80) }' || { echo "core coverage below 80%" >&2; exit 1; }
