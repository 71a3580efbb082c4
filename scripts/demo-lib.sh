# demo-lib.sh - what scripts/demo.sh and scripts/demo-web.sh share, sourced
# by both: the work directory with its cleanup, and the throwaway
# PostgreSQL with the producer's and the consumer's databases migrated.
#
#   demo_start_work PREFIX   work=/tmp/PREFIX.XXXXXX, pids=(), the EXIT trap
#                            stops every pid in pids, the server, removes work
#   demo_start_databases     the server in $work/pg; sets producer_db and
#                            consumer_db (needs bin: the build's bin dir)

demo_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	scripts/pg-tmp.sh stop "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}

demo_start_work() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	chmod 755 "$work" # the server runs as postgres when we are root
	pids=()
	trap demo_cleanup EXIT
}

demo_start_databases() {
	local server
	echo "demo: starting a throwaway PostgreSQL in $work/pg"
	server=$(scripts/pg-tmp.sh start "$work/pg")
	psql "$server" -qc "CREATE DATABASE producer" -c "CREATE DATABASE consumer"
	producer_db="$server dbname=producer"
	consumer_db="$server dbname=consumer"
	"$bin/outboxctl" migrate --db "$producer_db" --schema outbox --demo
	"$bin/outboxctl" migrate --db "$consumer_db" --schema inbox
}
