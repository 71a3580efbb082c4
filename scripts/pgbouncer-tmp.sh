#!/usr/bin/env bash
# pgbouncer-tmp.sh - a throwaway PgBouncer in front of a pg-tmp.sh server,
# for the tests and the examples (issue 33: the producer and enqueue
# through transaction pooling, the relay and consumer refused by it).
#
#   pgbouncer-tmp.sh start DIR PG_DIR MODE
#                         PgBouncer in DIR (created) for every database of
#                         the server in PG_DIR (pg-tmp.sh start), pool_mode
#                         MODE (transaction | session), unix socket only in
#                         DIR; writes DIR/env (PGHOST, PGPORT, PGUSER,
#                         OUTBOX_PGBOUNCER_CONNINFO) and prints the conninfo
#                         of its postgres database.
#   pgbouncer-tmp.sh stop DIR  stop it and remove DIR entirely.
#
# PgBouncer refuses to run as root: as root it runs as the 'postgres'
# user (as pg-tmp.sh's server does). It listens on no TCP port, so the
# port number only names the socket file. auth_type trust: test use only.
set -euo pipefail

cmd=${1:-}; dir=${2:-}
usage="usage: $0 start DIR PG_DIR transaction|session | stop DIR"
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "$usage" >&2; exit 2; }

as_owner() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
	pg_dir=${3:-}; mode=${4:-}
	[ -f "$pg_dir/env" ] || { echo "pgbouncer-tmp: no pg-tmp.sh server in '$pg_dir'" >&2; exit 2; }
	case "$mode" in transaction|session) ;; *) echo "$usage" >&2; exit 2 ;; esac
	command -v pgbouncer >/dev/null ||
		{ echo "pgbouncer-tmp: pgbouncer not found (apt-get install pgbouncer)" >&2; exit 2; }
	if [ -f "$dir/env" ]; then "$0" stop "$dir" || true; fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	rm -rf "${dir:?}"/*
	# shellcheck disable=SC1091
	pg_host=$(. "$pg_dir/env" && echo "$PGHOST") pg_port=$(. "$pg_dir/env" && echo "$PGPORT")
	port=6432
	echo '"postgres" ""' >"$dir/userlist.txt"
	# ignore_startup_parameters: what the drivers of examples/ send at
	# connect that PgBouncer 1.18 does not pass on by itself.
	cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$pg_host port=$pg_port
[pgbouncer]
listen_addr =
listen_port = $port
unix_socket_dir = $dir
auth_type = trust
auth_file = $dir/userlist.txt
admin_users = postgres
pool_mode = $mode
max_client_conn = 500
default_pool_size = 20
ignore_startup_parameters = extra_float_digits
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || { echo "pgbouncer-tmp: no 'postgres' user" >&2; exit 2; }
		chown -R postgres "$dir"
		p=$dir; while [ "$p" != / ]; do p=$(dirname "$p"); chmod o+x "$p" 2>/dev/null || true; done
	fi
	as_owner pgbouncer -d -q "$dir/pgbouncer.ini" ||
		{ echo "pgbouncer-tmp: pgbouncer did not start; log follows" >&2; tail -20 "$dir/pgbouncer.log" >&2; exit 1; }
	# -d returns once it forked; wait for the socket to accept a query.
	for _ in $(seq 1 300); do
		psql -h "$dir" -p "$port" -U postgres -d postgres -Atqc 'SELECT 1' >/dev/null 2>&1 && break
		sleep 0.1
	done
	psql -h "$dir" -p "$port" -U postgres -d postgres -Atqc 'SELECT 1' >/dev/null ||
		{ echo "pgbouncer-tmp: no answer on $dir; log follows" >&2; tail -20 "$dir/pgbouncer.log" >&2; exit 1; }
	conninfo="host=$dir port=$port user=postgres dbname=postgres"
	cat >"$dir/env" <<ENV
PGHOST=$dir
PGPORT=$port
PGUSER=postgres
OUTBOX_PGBOUNCER_CONNINFO='$conninfo'
ENV
	chmod o+r "$dir/env"
	echo "$conninfo"
	;;
stop)
	[ -d "$dir" ] || exit 0
	if [ -f "$dir/pgbouncer.pid" ]; then
		pid=$(cat "$dir/pgbouncer.pid")
		kill -INT "$pid" 2>/dev/null || true
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$dir"
	;;
*)
	echo "$usage" >&2; exit 2 ;;
esac
