#!/usr/bin/env bash
# Checks what ships for production (see docs/DEPLOY.md): the Dockerfile's static build and the binary's --version,
# helm lint and a strict decoding of every object helm template renders, the alert rules checked and unit-tested
# with Prometheus' own packages, and that every metric the Grafana dashboard and the alert rules query is one a
# running relay exports. The tests are the module deploy/deploytest, outside go.work; the pinned helm is built once
# into the tools cache. Each step prints the time it took.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
export POSTBOX_HELM
POSTBOX_HELM=$(scripts/deploy-tools.sh)
echo "-- deploy tools: $((SECONDS - t0))s"

cd deploy/deploytest
export GOWORK=off
# go vet compiles the module's packages and its dependencies (Kubernetes API types, Prometheus' rules and PromQL
# engine) into the build cache, once per machine; go test reuses them.
t0=$SECONDS
go vet ./...
echo "-- deploy go vet (first run compiles the dependencies): $((SECONDS - t0))s"
# scripts/test.sh passes its pinned staticcheck.
if [ -n "${STATICCHECK:-}" ]; then
	t0=$SECONDS
	"$STATICCHECK" ./...
	echo "-- deploy staticcheck: $((SECONDS - t0))s"
fi
t0=$SECONDS
go test -count=1 -timeout 30m ./...
echo "-- deploy go test: $((SECONDS - t0))s"
