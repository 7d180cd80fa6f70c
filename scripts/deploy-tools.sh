#!/usr/bin/env bash
# Builds the pinned helm and promtool from the Go module proxy into the tools cache ($POSTBOX_TOOLS, by default
# ~/.cache/postbox-tools), once per version, and prints the two paths: the deploy checks run these exact versions
# on every machine. Building them takes minutes the first time and nothing afterwards.
set -euo pipefail

HELM_VERSION=v3.22.0
PROMETHEUS_VERSION=v0.316.0

tools=${POSTBOX_TOOLS:-$HOME/.cache/postbox-tools}
mkdir -p "$tools"

# build NAME VERSION PACKAGE installs PACKAGE@VERSION as $tools/NAME-VERSION unless it is there already.
build() {
	local name=$1 version=$2 pkg=$3 out="$tools/$1-$2"
	if [ ! -x "$out" ]; then
		echo "building $name $version (once)" >&2
		GOBIN="$tools/bin" go install "$pkg@$version" >&2
		mv "$tools/bin/$name" "$out"
	fi
	echo "$out"
}

build helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm
build promtool "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool
