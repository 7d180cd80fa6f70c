#!/usr/bin/env bash
# Installs the AWS emulators the AWS adapters' tests start, pinned, from the npm registry into a cache of the
# project's own (POSTBOX_TOOLS, default ~/.cache/postbox-tools), so that a new machine gets the same ones:
#   fauxqs      SQS (AWS JSON 1.0, as aws-sdk-go-v2's service/sqs speaks it) and SNS; version 1.9 is the last that
#               runs on Node.js 20
#   kinesalite  Kinesis Data Streams (AWS JSON 1.1), in memory
# The tests find them there (internal/testenv.StartFauxqs, StartKinesalite) and start them on free 127.0.0.1 ports.
set -euo pipefail
FAUXQS_VERSION=1.9.2     # internal/testenv.FauxqsVersion
KINESALITE_VERSION=3.3.3 # internal/testenv.KinesaliteVersion
tools=${POSTBOX_TOOLS:-$HOME/.cache/postbox-tools}

# install PACKAGE VERSION FILE: npm-installs PACKAGE@VERSION into $tools/PACKAGE-VERSION unless FILE is there.
install() {
	local dir=$tools/$1-$2
	if [ -f "$dir/node_modules/$1/$3" ]; then
		return
	fi
	if ! command -v npm >/dev/null; then
		echo "aws emulators: npm is missing; install Node.js 20 or later (Debian: apt-get install -y nodejs npm)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$1@$2" >&2
}
install fauxqs "$FAUXQS_VERSION" dist/app.js
install kinesalite "$KINESALITE_VERSION" index.js
