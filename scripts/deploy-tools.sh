#!/usr/bin/env bash
# Builds the pinned helm from the Go module proxy into the tools cache ($POSTBOX_TOOLS, by default
# ~/.cache/postbox-tools), once per version, and prints its path: the deploy checks run this exact version on every
# machine. Building it takes minutes the first time and nothing afterwards; the time it took is printed on stderr.
# (The alert rules are checked and unit-tested with Prometheus' own Go packages inside deploy/deploytest, not with
# promtool, whose command pulls in every cloud SDK its service discoveries use.)
set -euo pipefail

HELM_VERSION=v3.22.0

tools=${POSTBOX_TOOLS:-$HOME/.cache/postbox-tools}
mkdir -p "$tools"

# build NAME VERSION PACKAGE installs PACKAGE@VERSION as $tools/NAME-VERSION unless it is there already.
build() {
	local name=$1 version=$2 pkg=$3 out="$tools/$1-$2" t0=$SECONDS
	if [ -x "$out" ]; then
		echo "-- $name $version: cached in $tools" >&2
	else
		echo "-- building $name $version (once per machine)" >&2
		GOBIN="$tools/bin" go install "$pkg@$version" >&2
		mv "$tools/bin/$name" "$out"
		echo "-- built $name $version: $((SECONDS - t0))s" >&2
	fi
	echo "$out"
}

build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
