#!/usr/bin/env bash
# table_writers_negative.sh - scripts/check-table-writers.sh must go red on
# a write outside a table's owner before its green on the real tree means
# anything: copy the sources into a scratch tree, add one stray write at a
# time, expect the check to fail naming the file and the table.
set -uo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-table-writers.sh
copy="common producer relay consumer ctl tools sql"
. "$(dirname "$0")/negative_lib.sh"
negative_start

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
fresh; rm "$scratch/t/sql/inbox/functions/purge.sql"
expect "owner file missing" \
	"the owner sql/inbox/functions/purge.sql of inbox.processed does not exist"

negative_end table_writers_negative
