#!/usr/bin/env bash
# Runs every fuzzer of the repository for FUZZTIME (default 30s) each. An input that fails is written under the
# package's testdata/fuzz/<Fuzzer>/ by go test; commit it with the fix, and the normal test run replays it for good.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-30s}

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
	"cmd/postbox ./internal/cli FuzzMatchTopic"
	"cmd/postbox ./internal/cli FuzzConfigFile"
	"cmd/postbox ./internal/cli FuzzParseURLs"
)
for f in "${fuzzers[@]}"; do
	read -r dir pkg name <<<"$f"
	echo "== $name ($dir $pkg) for $fuzztime"
	(cd "$dir" && go test -run='^$' -fuzz="^$name\$" -fuzztime="$fuzztime" "$pkg")
done
