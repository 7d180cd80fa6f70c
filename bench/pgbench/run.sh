#!/usr/bin/env bash
# What one more statement costs a one-row business transaction, measured by pgbench with no Postbox code at all:
# the floor under the enqueue scenario's ratio. Each script runs ROUNDS times in turns with CLIENTS clients; the
# output is each script's median transactions/s and its ratio to the business transaction alone.
#
#   bench/pgbench/run.sh [DATABASE_URL]     (default postgres://postgres@127.0.0.1:5432/postbox_bench)
set -euo pipefail
export PGOPTIONS="-c client_min_messages=warning"
cd "$(dirname "$0")"
url=${1:-postgres://postgres@127.0.0.1:5432/postbox_bench}
clients=${CLIENTS:-8}
seconds=${SECONDS_EACH:-6}
rounds=${ROUNDS:-3}
psql -q -v ON_ERROR_STOP=1 "$url" -f setup.sql
scripts=(business outbox_insert tiny_insert select_1)
declare -A runs
for ((r = 0; r < rounds; r++)); do
	for s in "${scripts[@]}"; do
		tps=$(pgbench -n -M prepared -c "$clients" -j 2 -T "$seconds" -f "$s.sql" "$url" | awk '/^tps/ { print $3 }')
		runs[$s]+="$tps "
	done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
base=$(median "${runs[business]}")
for s in "${scripts[@]}"; do
	m=$(median "${runs[$s]}")
	awk -v s="$s" -v m="$m" -v b="$base" 'BEGIN { printf "%-13s %9.0f tx/s  ratio %.2f\n", s, m, m / b }'
done
psql -q "$url" -c "DROP TABLE pgb_orders, pgb_outbox, pgb_tiny"
