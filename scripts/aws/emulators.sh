#!/usr/bin/env bash
# Installs the AWS emulators the SQS adapter's tests start, pinned, from the npm registry into a cache of the
# project's own (POSTBOX_TOOLS, default ~/.cache/postbox-tools), so that a new machine gets the same ones:
#   fauxqs   SQS (AWS JSON 1.0, as aws-sdk-go-v2's service/sqs speaks it) and SNS; version 1.9 is the last that
#            runs on Node.js 20
# The tests find it there (internal/testenv.StartFauxqs) and start it on a free 127.0.0.1 port. Prints the path.
set -euo pipefail
FAUXQS_VERSION=1.9.2
tools=${POSTBOX_TOOLS:-$HOME/.cache/postbox-tools}
dir=$tools/fauxqs-$FAUXQS_VERSION
if [ ! -f "$dir/node_modules/fauxqs/dist/app.js" ]; then
	if ! command -v npm >/dev/null; then
		echo "aws emulators: npm is missing; install Node.js 20 or later (Debian: apt-get install -y nodejs npm)" >&2
		exit 1
	fi
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "fauxqs@$FAUXQS_VERSION" >&2
fi
echo "$dir"
