// Package deploytest checks what the repository ships for production, under deploy/ and in the Dockerfile: the
// image's build gives a static binary, the Helm chart lints and renders objects Kubernetes accepts, the alert rules
// pass the checks of promtool check rules and their unit tests (promtool's format, run with Prometheus' own rules
// and PromQL packages), and every metric the Grafana dashboard and the rules query is one a running relay exports.
//
// It is a module of its own, outside go.work, so that nobody who uses Postbox downloads Helm, Kubernetes or
// Prometheus packages, and so that their versions never change what the other modules build with. Run it with
// scripts/deploy-check.sh, which builds the pinned helm first.
package deploytest
