#!/usr/bin/env bash
# Checks what ships for production (see docs/DEPLOY.md): the Dockerfile's static build and the binary's --version,
# helm lint and a strict decoding of every object helm template renders, promtool check rules and test rules, and
# that every metric the Grafana dashboard and the alert rules query is one a running relay exports. The tests are
# the module deploy/deploytest, outside go.work; the pinned helm and promtool are built once into the tools cache.
set -euo pipefail
cd "$(dirname "$0")/.."

tools=$(scripts/deploy-tools.sh)
export POSTBOX_HELM POSTBOX_PROMTOOL
POSTBOX_HELM=$(sed -n 1p <<<"$tools")
POSTBOX_PROMTOOL=$(sed -n 2p <<<"$tools")

cd deploy/deploytest
export GOWORK=off
go vet ./...
# scripts/test.sh passes its pinned staticcheck.
if [ -n "${STATICCHECK:-}" ]; then
	"$STATICCHECK" ./...
fi
go test -count=1 -timeout 30m ./...
