#!/usr/bin/env bash
# Starts the local services the tests use when they are not answering, and waits until they answer.
# The same commands that start them on a development machine start them here; see DEVELOPERS.md.
set -uo pipefail

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

ensure() {
	local name=$1 port=$2; shift 2
	if answers "$port"; then return 0; fi
	echo "services: starting $name" >&2
	"$@" >/dev/null 2>&1 || true
	for _ in $(seq 1 120); do
		if answers "$port"; then return 0; fi
		sleep 0.5
	done
	echo "services: $name did not answer on 127.0.0.1:$port after 60s" >&2
	return 1
}

pg_ready() {
	for _ in $(seq 1 60); do
		pg_isready -q -h 127.0.0.1 -p 5432 && return 0
		sleep 0.5
	done
	echo "services: PostgreSQL accepts TCP but is not ready" >&2
	return 1
}

# pgbouncer starts PgBouncer (installing Debian's package when it is missing) on 127.0.0.1:6432 in transaction mode,
# with the repository's configuration, in front of the local PostgreSQL.
pgbouncer_start() {
	if ! command -v pgbouncer >/dev/null; then
		echo "services: installing pgbouncer" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y pgbouncer >/dev/null || return 1
	fi
	local user=()
	if [ "$(id -u)" = 0 ]; then user=(-u postgres); fi # PgBouncer refuses to run as root
	pgbouncer -d "${user[@]}" "$(cd "$(dirname "$0")" && pwd)/pgbouncer/pgbouncer.ini"
}

status=0
ensure PostgreSQL 5432 pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql 2>/dev/null | head -1)" main start && pg_ready || status=1
ensure PgBouncer 6432 pgbouncer_start || status=1
ensure MariaDB 3306 start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || status=1
ensure Redis 6379 redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || status=1
ensure RabbitMQ 5672 rabbitmq-server -detached || status=1
ensure Mosquitto 1883 mosquitto -d -c /etc/mosquitto/mosquitto.conf || status=1
ensure NATS 4222 start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || status=1
exit $status
