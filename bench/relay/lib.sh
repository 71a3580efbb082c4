# bench/relay/lib.sh - what run.sh and tls.sh share: a work dir under /tmp
# whose processes (their pids in the array `pids`) and private PostgreSQL
# ($work/pg, and $work/standby when there is one) are stopped on any exit, the dir removed unless BENCH_KEEP
# is set. Source it, then call bench_workdir PREFIX.

bench_workdir() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	chmod 755 "$work"
	pids=()
	trap bench_cleanup EXIT
}

bench_cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [ -z "${BENCH_KEEP:-}" ]; then
		scripts/pg-tmp.sh stop "$work/standby" >/dev/null 2>&1 || true
		scripts/pg-tmp.sh stop "$work/pg" >/dev/null 2>&1 || true
		rm -rf "$work"
	else
		echo "bench: kept $work (server still running: scripts/pg-tmp.sh stop $work/pg)"
	fi
}
