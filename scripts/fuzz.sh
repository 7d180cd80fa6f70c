#!/usr/bin/env bash
# Runs every fuzzer of the repository for FUZZTIME each (go test -fuzztime: a count of inputs such as 200000x, the
# default, or a duration such as 30s). An input that fails is written under the package's testdata/fuzz/<Fuzzer>/
# by go test; commit it with the fix, and the normal test run replays it for good.
#
# The default is a count because a duration can fail a run that found nothing: Go 1.26's fuzzing coordinator may
# report its own deadline as "context deadline exceeded" when the time is up (go.dev/issue/75804, fixed in 1.27).
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-200000x}

# module directory, package, fuzzer
fuzzers=(
	". . FuzzEnqueueValidation"
	". . FuzzParseUUID"
	". ./driver FuzzIdentifier"
	". ./driver FuzzQuoteIdent"
	". ./broker FuzzCloudEventsRoundTrip"
	". ./broker FuzzCloudEventsDecode"
	"jsonschema . FuzzSchema"
	"broker/webhook . FuzzVerify"
	"broker/webhook . FuzzVerifierHeaders"
	"cmd/postbox ./internal/cli FuzzRedactURL"
	". . FuzzMatchTopic"
	"cmd/postbox ./internal/cli FuzzConfigFile"
	"cmd/postbox ./internal/cli FuzzParseURLs"
	"driver/pgxv5/wal . FuzzDecode"
	"broker/debezium . FuzzRoute"
)
for f in "${fuzzers[@]}"; do
	read -r dir pkg name <<<"$f"
	echo "== $name ($dir $pkg), -fuzztime $fuzztime"
	(cd "$dir" && go test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg")
done
