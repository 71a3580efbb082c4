#!/usr/bin/env bash
# table_writers_negative.sh - scripts/check-table-writers.sh must go red on
# a write outside a table's owner before its green on the real tree means
# anything: copy the sources into a scratch tree, add one stray write at a
# time, expect the check to fail naming the file and the table.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
check=$src/scripts/check-table-writers.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0

fresh() {
	rm -rf "$scratch/t"
	mkdir -p "$scratch/t"
	for p in common producer relay consumer ctl tools sql; do
		cp -r "$src/$p" "$scratch/t/"
	done
}

expect() { # expect NAME NEEDLE: the check fails and says NEEDLE
	out=$(OUTBOX_LINT_ROOT="$scratch/t" "$check" 2>&1)
	rc=$?
	if [ $rc = 0 ] || ! grep -qF -- "$2" <<<"$out"; then
		echo "FAIL $1: exit $rc, wanted a failure saying '$2':"
		echo "$out"
		failures=$((failures + 1))
	else
		echo "ok   $1"
	fi
}

fresh
out=$(OUTBOX_LINT_ROOT="$scratch/t" "$check" 2>&1) || { echo "FAIL: the unbroken copy does not pass: $out"; exit 1; }
echo "ok   unbroken copy passes"

# the webhook handler releasing its key behind keyclaim's back (the table by macro)
fresh; cat >>"$scratch/t/consumer/handler_webhook.c" <<'C'
static const char stray[] = "DELETE FROM " WEBHOOK_TABLE
    " WHERE idempotency_key = $1";
C
expect "webhook key table written by the handler" \
	"consumer/handler_webhook.c: DELETE FROM inbox.webhook_calls, but it is written only by common/keyclaim.c"

# the producer's split mode recording its key by hand (literals across lines)
fresh; cat >>"$scratch/t/producer/api.c" <<'C'
static const char stray[] = "INSERT "
    "INTO " PRODUCER_KEY_TABLE " (idempotency_key) VALUES ($1)";
C
expect "producer key table written outside keyclaim" \
	"producer/api.c: INSERT INTO app.idempotency_keys, but it is written only by common/keyclaim.c"

# the relay updating a batch from C instead of through outbox.record
fresh; echo 'static const char stray[] = "UPDATE outbox.batches SET state = '"'done'"'";' \
	>>"$scratch/t/relay/claim.c"
expect "batches written from C" "relay/claim.c: UPDATE outbox.batches, but it is written only by"

# a schema file truncating a table it does not own
fresh; echo 'SELECT 1; -- TRUNCATE outbox.dead' >>"$scratch/t/sql/outbox/functions/claim.sql"
expect "dead letters truncated by claim" "sql/outbox/functions/claim.sql: TRUNCATE outbox.dead"

# a table nobody owns
fresh; echo 'static const char stray[] = "INSERT INTO outbox.audit (x) VALUES (1)";' \
	>>"$scratch/t/ctl/status_cmd.c"
expect "table with no owner" "ctl/status_cmd.c: INSERT INTO outbox.audit, a table with no owner"

# an owner line naming a file that is gone
fresh; rm "$scratch/t/consumer/inbox_purge.c"
expect "owner file missing" "the owner consumer/inbox_purge.c of inbox.processed does not exist"

[ $failures = 0 ] && echo "table_writers_negative: all broken trees were refused" || exit 1
