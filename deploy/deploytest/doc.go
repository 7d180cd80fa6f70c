// Package deploytest checks what the repository ships for production, under deploy/ and in the Dockerfile: the
// image's build gives a static binary, the Helm chart lints and renders objects Kubernetes accepts, the alert rules
// pass promtool's checks and their unit tests, and every metric the Grafana dashboard and the rules query is one a
// running relay exports.
//
// It is a module of its own, outside go.work, so that nobody who uses Postbox downloads Helm, Kubernetes or
// Prometheus packages, and so that their versions never change what the other modules build with. Run it with
// scripts/deploy-check.sh, which builds the pinned helm and promtool first.
package deploytest
