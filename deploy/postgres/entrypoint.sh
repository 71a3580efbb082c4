#!/bin/sh
# entrypoint.sh - first start: initdb in $PGDATA with $POSTGRES_USER as the
# superuser (password $POSTGRES_PASSWORD), create $POSTGRES_DB and run the
# scripts in /docker-entrypoint-initdb.d/*.sh (as the official image does); every
# start: exec the server in the foreground (PID 1, receives STOPSIGNAL).
set -eu
: "${PGDATA:=/var/lib/postgresql/data}"
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	if [ -z "${POSTGRES_PASSWORD:-}" ]; then
		echo "outbox-postgres: POSTGRES_PASSWORD is not set (TCP clients need it)" >&2
		exit 1
	fi
	pwfile=$(mktemp)
	printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
	initdb -D "$PGDATA" -U "$user" --pwfile="$pwfile" -E UTF8 --locale=C.UTF-8 \
		--auth-local=trust --auth-host=scram-sha-256 >/dev/null
	rm -f "$pwfile"
	{
		echo "listen_addresses = '*'"
		echo "unix_socket_directories = '/var/run/postgresql'"
	} >>"$PGDATA/postgresql.conf"
	echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
	# the database, created by a server that nobody else can reach (no TCP,
	# a socket in a private directory): a health check must not take it
	# for the real one
	initsock=$(mktemp -d)
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories='$initsock'" \
		-w start >/dev/null
	if [ "$db" != postgres ]; then
		createdb -U "$user" -h "$initsock" "$db"
	fi
	# as the official image does: the first-start scripts mounted in
	# /docker-entrypoint-initdb.d (the compose stack's roles.sh), against
	# this private server
	for f in /docker-entrypoint-initdb.d/*.sh; do
		[ -e "$f" ] || continue
		echo "outbox-postgres: running $f"
		PGHOST=$initsock POSTGRES_USER=$user POSTGRES_DB=$db sh "$f"
	done
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	rmdir "$initsock"
	echo "outbox-postgres: initialized $PGDATA (user $user, database $db)"
fi

if [ "${1:-}" = postgres ]; then
	shift
	exec postgres -D "$PGDATA" "$@"
fi
exec "$@"
