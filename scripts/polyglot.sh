#!/usr/bin/env bash
# Installs what the examples in other languages need (internal/adaptertest/polyglot runs them), from Debian's
# packages when missing: python3 with python3-psycopg2, nodejs with npm, and psql. The Node examples' own
# packages come from npm, installed by the tests from examples/node/package-lock.json.
set -euo pipefail
need=()
if ! /usr/bin/python3 -c 'import psycopg2' 2>/dev/null; then need+=(python3 python3-psycopg2); fi
if ! command -v node >/dev/null; then need+=(nodejs); fi
if ! command -v npm >/dev/null; then need+=(npm); fi
if ! command -v psql >/dev/null; then need+=(postgresql-client); fi
if [ ${#need[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "missing ${need[*]}: run 'apt-get install -y ${need[*]}' as root" >&2
	exit 1
fi
echo "polyglot: installing ${need[*]}" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
