#!/usr/bin/env bash
# pg-tmp.sh - a throwaway PostgreSQL 15 for the tests and the demo.
#
#   pg-tmp.sh start DIR   initdb + start in DIR (created), unix socket only,
#                         in DIR/sock; writes DIR/env (PGHOST, PGPORT, PGUSER,
#                         OUTBOX_PG_CONNINFO) and prints the conninfo.
#   pg-tmp.sh stop DIR    stop the server and remove DIR entirely.
#   pg-tmp.sh restart DIR stop and start the same cluster (data kept).
#   pg-tmp.sh crash DIR   stop it the hard way (-m immediate: crash recovery at start), start it.
#   pg-tmp.sh kill DIR    stop it the hard way and leave it stopped (a primary that died).
#   pg-tmp.sh resume DIR  start a cluster that kill left stopped (data kept).
#   pg-tmp.sh standby PRIMARY_DIR DIR NAME
#                         a streaming standby of the server in PRIMARY_DIR
#                         (pg_basebackup -R), asynchronous, application_name
#                         NAME, its own socket in DIR/sock; writes DIR/env.
#   pg-tmp.sh promote DIR promote the standby in DIR (waits until it is).
#
# PostgreSQL refuses to run as root: as root, the cluster runs as the
# 'postgres' user (the files are chowned to it); otherwise as the caller.
# The server listens on no TCP port (listen_addresses=''), so two runs can
# never collide; the port number only names the socket file.
# Set OUTBOX_PG_FSYNC=on to keep fsync (benchmarks); tests turn it off.
# Set OUTBOX_PG_LISTEN=ADDR (one IPv4 address, e.g. 198.18.0.1) to ALSO
# listen on TCP there (same port), with pg_hba trusting OUTBOX_PG_HBA_NET
# (default 198.18.0.0/15, the test-network range): for relays in other
# network namespaces (tests/netns/). DIR/env then also has PGHOST_TCP and
# OUTBOX_PG_TCP_CONNINFO. Test use only: trust, no TLS.
# Set OUTBOX_PG_NEXT_XID=N (start only) for a cluster whose transaction
# counter starts at N (pg_resetwal -x after initdb, plus the zero-filled
# pg_xact segment N falls in, which the server reads at start):
# pg_current_xact_id() is N or more. N is 1000000..2000000000: above the
# ids initdb used (below them its catalog would be in the future) and well
# short of the wraparound limits. For a dump restored into a cluster whose
# counter is behind the old one's (tests/integration/test_restore.c).
set -euo pipefail

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop|restart|crash|kill|resume|promote DIR | standby PRIMARY_DIR DIR NAME" >&2; exit 2; }

bindir=$(pg_config --bindir 2>/dev/null || true)
if [ ! -x "$bindir/initdb" ]; then
	for d in /usr/lib/postgresql/15/bin /usr/lib/postgresql/*/bin; do
		[ -x "$d/initdb" ] && { bindir=$d; break; }
	done
fi
[ -x "$bindir/initdb" ] || { echo "pg-tmp: initdb not found (install postgresql-15)" >&2; exit 2; }

as_owner() {
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

pg_start() {
	local log="$dir/server.log"
	as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$log" -w -t 60 start >/dev/null ||
		{ echo "pg-tmp: server did not start; log follows" >&2; tail -20 "$log" >&2; exit 1; }
}

case "$cmd" in
start)
	if [ -f "$dir/env" ]; then "$0" stop "$dir" || true; fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	rm -rf "${dir:?}"/*
	mkdir -p "$dir/sock"
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 || { echo "pg-tmp: no 'postgres' user (install postgresql-15)" >&2; exit 2; }
		chown -R postgres "$dir"
		# The postgres user must be able to reach DIR through its parents.
		p=$dir; while [ "$p" != / ]; do p=$(dirname "$p"); chmod o+x "$p" 2>/dev/null || true; done
	fi
	port=$(( 20000 + RANDOM % 20000 ))
	listen=${OUTBOX_PG_LISTEN:-} hba_net=${OUTBOX_PG_HBA_NET:-198.18.0.0/15}
	if [ -n "$listen" ]; then
		[[ $listen =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] ||
			{ echo "pg-tmp: OUTBOX_PG_LISTEN='$listen' is not one IPv4 address" >&2; exit 2; }
		[[ $hba_net =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}/[0-9]{1,2}$ ]] ||
			{ echo "pg-tmp: OUTBOX_PG_HBA_NET='$hba_net' is not an IPv4 CIDR" >&2; exit 2; }
	fi
	next_xid=${OUTBOX_PG_NEXT_XID:-}
	if [ -n "$next_xid" ] && { ! [[ $next_xid =~ ^[1-9][0-9]{0,9}$ ]] ||
		[ "$next_xid" -lt 1000000 ] || [ "$next_xid" -gt 2000000000 ]; }; then
		echo "pg-tmp: OUTBOX_PG_NEXT_XID='$next_xid' is not a number in 1000000..2000000000" >&2; exit 2
	fi
	as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
		{ echo "pg-tmp: initdb failed; log follows" >&2; tail -20 "$dir/initdb.log" >&2; exit 1; }
	if [ -n "$next_xid" ]; then
		# pg_xact holds 2 bits per transaction: a segment file of 32 pages
		# of 8 KiB covers 1048576 of them and is named by its number (4 hex
		# digits). The server reads N's page at start; it makes the later
		# segments itself. Segment 0 is initdb's (one page): extended.
		as_owner "$bindir/pg_resetwal" -x "$next_xid" -D "$dir/data" >>"$dir/initdb.log" 2>&1 ||
			{ echo "pg-tmp: pg_resetwal -x $next_xid failed; log follows" >&2; tail -20 "$dir/initdb.log" >&2; exit 1; }
		seg="$dir/data/pg_xact/$(printf '%04X' $(( next_xid / 1048576 )))"
		if [ -f "$seg" ]; then
			as_owner truncate -s 262144 "$seg"
		else
			as_owner dd if=/dev/zero of="$seg" bs=8192 count=32 status=none
		fi
	fi
	[ -z "$listen" ] || echo "host all all $hba_net trust" >>"$dir/data/pg_hba.conf"
	cat >>"$dir/data/postgresql.conf" <<CONF
listen_addresses = '$listen'
port = $port
unix_socket_directories = '$dir/sock'
fsync = ${OUTBOX_PG_FSYNC:-off}
synchronous_commit = ${OUTBOX_PG_FSYNC:-off}
full_page_writes = ${OUTBOX_PG_FSYNC:-off}
max_connections = 300
shared_buffers = 256MB
log_min_messages = warning
CONF
	pg_start
	conninfo="host=$dir/sock port=$port user=postgres dbname=postgres"
	cat >"$dir/env" <<ENV
PGHOST=$dir/sock
PGPORT=$port
PGUSER=postgres
OUTBOX_PG_CONNINFO='$conninfo'
ENV
	[ -z "$listen" ] || cat >>"$dir/env" <<ENV
PGHOST_TCP=$listen
OUTBOX_PG_TCP_CONNINFO='host=$listen port=$port user=postgres dbname=postgres'
ENV
	chmod o+r "$dir/env"
	echo "$conninfo"
	;;
stop)
	[ -d "$dir" ] || exit 0
	if [ -d "$dir/data" ]; then
		as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null 2>&1 || true
	fi
	rm -rf "$dir"
	;;
restart)
	as_owner "$bindir/pg_ctl" -D "$dir/data" -m fast -w -t 60 stop >/dev/null
	pg_start
	;;
kill)
	as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null
	;;
resume)
	pg_start
	;;
standby)
	primary=$dir; dir=${3:-}; name=${4:-}
	[ -f "$primary/env" ] && [ -n "$dir" ] && [ -n "$name" ] ||
		{ echo "usage: $0 standby PRIMARY_DIR DIR NAME (PRIMARY_DIR from pg-tmp.sh start)" >&2; exit 2; }
	primary=$(cd "$primary" && pwd)
	# shellcheck disable=SC1091
	pport=$(. "$primary/env" && echo "$PGPORT")
	if [ -f "$dir/env" ]; then "$0" stop "$dir" || true; fi
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	rm -rf "${dir:?}"/*
	mkdir -p "$dir/sock"
	if [ "$(id -u)" = 0 ]; then
		chown -R postgres "$dir"
		p=$dir; while [ "$p" != / ]; do p=$(dirname "$p"); chmod o+x "$p" 2>/dev/null || true; done
	fi
	port=$(( 20000 + RANDOM % 20000 ))
	as_owner "$bindir/pg_basebackup" -h "$primary/sock" -p "$pport" -U postgres -D "$dir/data" \
		-X stream -R -c fast >"$dir/basebackup.log" 2>&1 ||
		{ echo "pg-tmp: pg_basebackup failed; log follows" >&2; tail -20 "$dir/basebackup.log" >&2; exit 1; }
	cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
unix_socket_directories = '$dir/sock'
hot_standby = on
CONF
	# after -R's own line: the last setting wins
	echo "primary_conninfo = 'host=$primary/sock port=$pport user=postgres application_name=$name'" \
		>>"$dir/data/postgresql.auto.conf"
	pg_start
	conninfo="host=$dir/sock port=$port user=postgres dbname=postgres"
	cat >"$dir/env" <<ENV
PGHOST=$dir/sock
PGPORT=$port
PGUSER=postgres
OUTBOX_PG_CONNINFO='$conninfo'
ENV
	chmod o+r "$dir/env"
	echo "$conninfo"
	;;
promote)
	as_owner "$bindir/pg_ctl" -D "$dir/data" -w -t 60 promote >/dev/null
	;;
crash)
	# Immediate stop: no checkpoint, WAL not yet written is lost (commits
	# made with synchronous_commit = off among it), recovery at start.
	as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w -t 60 stop >/dev/null
	pg_start
	;;
*)
	echo "usage: $0 start|stop|restart|crash|kill|resume|promote DIR | standby PRIMARY_DIR DIR NAME" >&2; exit 2 ;;
esac
