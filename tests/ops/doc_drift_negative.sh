#!/usr/bin/env bash
# doc_drift_negative.sh BIN_DIR - scripts/check-doc-drift.sh must go red on
# each kind of stale quote before its green on the real docs means
# anything: copy the docs and what they are checked against into a scratch
# tree, make one quote stale at a time, expect the check to name it.
set -uo pipefail
export OUTBOX_BIN_DIR=${1:?usage: doc_drift_negative.sh BIN_DIR}
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-doc-drift.sh
copy="README.md docs sql bench examples common relay consumer producer ctl tools"
. "$(dirname "$0")/negative_lib.sh"
negative_start

# a function renamed in sql/ and not in the docs
fresh; mv "$scratch/t/sql/inbox/functions/dedup_lookup.sql" "$scratch/t/sql/inbox/functions/x.sql"
sed -i 's/inbox\.dedup_lookup/inbox.dedup_probe/' "$scratch/t/sql/inbox/functions/x.sql"
expect "a renamed SQL function" 'docs/inbox-sql.md: `inbox.dedup_lookup` is not a table'

# a flag a doc quotes that the program does not take
fresh; echo 'Run `outbox-relay --db X --batchsize 10`.' >>"$scratch/t/docs/relay.md"
expect "an unknown relay flag" 'outbox-relay has no --batchsize'

# a subcommand's flag given to another subcommand
fresh; echo 'Run `outboxctl status --older-than 7d`.' >>"$scratch/t/docs/operations.md"
expect "a flag of another subcommand" 'outboxctl status has no --older-than'

# a metric renamed in the code and not in the docs
fresh; sed -i 's/outbox_relay_delivered_total/outbox_relay_delivered_messages_total/g' "$scratch/t"/relay/*.c
expect "a renamed metric" 'metric `outbox_relay_delivered_total` is not in the C sources'

negative_end doc_drift_negative
