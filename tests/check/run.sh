#!/usr/bin/env bash
# run.sh BIN_DIR - the protocol checker in the suite (ctest check_protocol):
#
#  1. a PostgreSQL of its own (scripts/pg-tmp.sh) that loads plpgsql_check
#     (its profiler counts statements across sessions) and runs no
#     autovacuum (nothing but the checker's sessions takes locks);
#  2. outbox-check over CHECK_SEEDS seeds of CHECK_STEPS steps on the
#     schema as it is: no violation, the same history when the first seed
#     runs twice, and the coverage of the protocol's functions at least 95 %
#     of statements and 85 % of branches;
#  3. the fixes of issue 29's defects 1, 3, 4 and 5 reverted, one at a time
#     (the schema files copied and changed below, applied with --functions:
#     the way to point the checker at any modified function file), and the
#     checker must find each by itself, with its default generator, within
#     CHECK_REVERTED_SEEDS seeds: it prints the step it failed at; and the
#     same for the claim's byte budget ignored, in a stream's cut (bs) and
#     in a batch of retries (br), for an enqueue that looks for its key
#     in the current slot only (sk), and for a claim that takes a window as
#     read to its end when the byte budget (we) or a key's second message
#     (wk) ended its cut, and for a claim that says nothing more is
#     claimable while another stream has work (mh), for a claim that
#     ignores enqueue's not_before (nb), and for a slot switch that leaves
#     the closing slot's new streams without rows (sd);
#  4. the relay's pipeline slots driven through a simulated transport
#     (--drive slots): no violation in CHECK_SLOT_SEEDS seeds, and the
#     shared-outcomes defect put back found within CHECK_REVERTED_SEEDS.
#  5. the inbox's driver (outbox-check --inbox, tests/check/inbox_drive.c)
#     over CHECK_INBOX_SEEDS seeds on the inbox's functions as they are (no
#     violation), then on three broken variants, each of which it must
#     catch within CHECK_REVERTED_SEEDS seeds: the legacy identity rule
#     without its other kind (inbox.dedup_record), the purge by the time
#     applied alone (inbox.purge without its message's created_at
#     horizon), the empty source's gate not taken (inbox.take_source_gate).
# The server is stopped and removed however the run ends.
set -euo pipefail
bin=${1:?usage: run.sh BIN_DIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
seeds=${CHECK_SEEDS:-40}
steps=${CHECK_STEPS:-250}
reverted_seeds=${CHECK_REVERTED_SEEDS:-25}
inbox_seeds=${CHECK_INBOX_SEEDS:-40}
inbox_steps=${CHECK_INBOX_STEPS:-150}
export OUTBOX_TEST_DATA=$src/tests/data

work=$(mktemp -d /tmp/outbox-check.XXXXXX)
cleanup() { "$src/scripts/pg-tmp.sh" stop "$work/pg" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT

say() { echo "check: $*"; }

"$src/scripts/pg-tmp.sh" start "$work/pg" >/dev/null
set -a; . "$work/pg/env"; set +a
psql -qX -d "$OUTBOX_PG_CONNINFO" -c "ALTER SYSTEM SET shared_preload_libraries = 'plpgsql_check'" \
	-c "ALTER SYSTEM SET autovacuum = off"
"$src/scripts/pg-tmp.sh" restart "$work/pg" >/dev/null
db=$OUTBOX_PG_CONNINFO

# 2. the schema as it is
say "outbox-check: seeds 1..$seeds x $steps steps, coverage, the first seed twice"
"$bin/outbox-check" --db "$db" --seed 1 --seeds "$seeds" --steps "$steps" --quiet --repeat \
	--coverage --min-statements 95 --min-branches 85 --script "$work/violation.sql" ||
	{ code=$?; [ -f "$work/violation.sql" ] && { say "the replay script:"; cat "$work/violation.sql"; }; exit "$code"; }

# 3. each defect's fix reverted: a copy of the files it lives in, changed
fns=$src/sql/outbox/functions
revert() { # NAME FILE PERL-EXPRESSION: DIR/FILE is FILE with the fix taken out
	local dir=$work/$1 file=$2
	mkdir -p "$dir"
	[ -f "$dir/$file" ] || cp "$fns/$file" "$dir/$file"
	perl -0pi -e "$3" "$dir/$file"
}
# defect 1: a lane takes a key's message whatever its number (no early park)
revert d1 claim.sql 's/early := ARRAY\(.*?WHERE f\.ordering_seq > COALESCE\(x\.next_seq, 1\) OR f\.not_before > now\(\)\);/early := \x27{}\x27;/s'
# defect 3: dead letters go after --dead-retention even while they block their key
revert d3 housekeep.sql 's/\n\s*AND NOT EXISTS \(SELECT 1 FROM outbox\.ordering_blocks k\n\s*WHERE k\.topic = d\.topic AND k\.ordering_key = d\.ordering_key\n\s*AND k\.state = \x27dead\x27\);/;/s'
revert d3 housekeep.sql 's/    -- \(its key\x27s parked messages.*?(    IF retention_ms <= 0 THEN)/$1/s'
# defect 4: a split puts the messages back one by one, unbatched, and a retry
# batch is never split (the split of 012)
revert d4 claim.sql 's/(IF was IS NOT NULL AND b\.takeovers >= outbox\.batch_split_after\(\)) THEN/$1 AND b.kind = \x27s\x27 THEN/'
mkdir -p "$work/d4"
cat >"$work/d4/split_batch.sql" <<'SQL'
-- outbox.split_batch as migration 012 had it (defect 4 of issue 29)
CREATE OR REPLACE FUNCTION outbox.split_batch(protocol integer, b outbox.batches,
                                              skip_dead_heads boolean) RETURNS void
    LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO outbox.retries (id, topic, idempotency_key, payload, ordering_key,
                                ordering_seq, created_at, attempts, claims, due_at, last_error,
                                fence)
    SELECT e.id, e.topic, e.idempotency_key, e.payload, e.ordering_key, e.ordering_seq,
           e.created_at, b.attempts - 1, b.claims, now(),
           format('batch %s taken over %s times: split into single messages', b.id,
                  b.takeovers), b.fence
      FROM outbox.batch_events(b) e
    ON CONFLICT DO NOTHING;
    INSERT INTO outbox.ordering_blocks (topic, ordering_key, state)
    SELECT DISTINCT b.topic, e.ordering_key, 'retry' FROM outbox.batch_events(b) e
     WHERE e.ordering_key IS NOT NULL
    ON CONFLICT DO NOTHING;
    UPDATE outbox.batches x SET state = 'done', done_at = now() WHERE x.id = b.id;
    IF b.lane > 0 THEN
        UPDATE outbox.streams s SET inflight = NULL
         WHERE s.topic = b.topic AND s.lane = b.lane AND s.inflight = b.id;
    END IF;
END
$$;
SQL
# defect 5: no adoption of a restore, and the claim reads the old cluster's state
revert d5 housekeep.sql 's/    IF outbox\.restored\(\) THEN\n.*?\n    END IF;\n//s'
revert d5 claim.sql 's/            CONTINUE WHEN pg_snapshot_xmax\(st\.snap_lo\).*?pg_snapshot_xmax\(pg_current_snapshot\(\)\);\n//s'
revert d5 claim.sql 's/           AND NOT COALESCE\(pg_snapshot_xmax\(x\.snap_hi\)\n.*?, false\)\n//s'

# the byte budget (max_bytes, relay protocol 4) ignored by a stream's cut
revert bs within_bytes.sql 's/IF max_bytes IS NULL THEN/IF true THEN/'
# ... and by a batch of retries
revert br claim.sql 's/WHERE p\.nth = 1 OR max_bytes IS NULL OR p\.upto <= max_bytes/WHERE true/'

# an enqueue that looks for its key in the current slot only, not in every
# slot that holds messages (outbox.slot_find, 019)
revert sk enqueue.sql "s/ARRAY\\(SELECT s\\.slot FROM outbox\\.slots s WHERE s\\.state <> 'empty'\\n\\s*ORDER BY s\\.state = 'current' DESC, s\\.slot\\)/ARRAY(SELECT s.slot FROM outbox.slots s WHERE s.state = 'current')/"

# a window taken as read to its end (it becomes the floor at once) when the
# byte budget ended the cut (we), or a key's second message did (wk): what
# was left behind in it is never claimed
revert we claim.sql 's/ended := nread < max_n AND cardinality\(cand\) = nread AND/ended := nread < max_n AND/'
revert wk claim.sql 's/ AND stop_at IS NULL;/;/'
# a claim that says nothing more is claimable while another stream has work
# (outbox.more_claimable without its look at the streams): H1
revert mh more_claimable.sql 's/    IF EXISTS \(SELECT 1 FROM outbox\.streams s\n.*?    END IF;\n//s'

# a claim that ignores not_before (022): a delayed message is taken at the
# cut, in a lane and in lane 0, and its key's later messages with it
revert nb claim.sql 's/ OR f\.not_before > now\(\)\);/);/'
revert nb claim.sql 's/parked := ARRAY\(SELECT c\.id FROM unnest\(cand\) c WHERE c\.not_before > now\(\)\);/parked := \x27{}\x27;/'
# a slot switch that does not give the closing slot's streams their rows
# (024: discovery reads the current slot only): a stream no relay read
# before the switch is never claimed, and its slot is truncated under it
revert sd housekeep.sql 's/                PERFORM outbox\.discover_streams\(\);\n(                UPDATE outbox\.slots x SET state = .closed.)/$1/'
failed=0
# expect_violation NAME EXE ARGS...: the checker EXE (outbox-check, or a
# build of it with a defect put back) run with ARGS must find a violation
# (exit 1); its output in $out
expect_violation() {
	local name=$1 exe=$2 code
	shift 2
	set +e
	out=$("$bin/$exe" --db "$db" "$@" 2>&1)
	code=$?
	set -e
	if [ "$code" -ne 1 ]; then
		say "$name: the checker did not find it (exit $code):"
		echo "$out" | tail -5
		failed=1
	fi
}
for d in d1 d3 d4 d5 bs br sk we wk mh nb sd; do
	for f in "$work/$d"/*.sql; do
		[ -f "$fns/$(basename "$f")" ] || continue
		if cmp -s "$f" "$fns/$(basename "$f")"; then
			say "the revert of $d no longer changes $(basename "$f"): update tests/check/run.sh"
			failed=1
		fi
	done
	say "outbox-check with $d's fix reverted (--functions $d)"
	expect_violation "$d" outbox-check --functions "$work/$d" --seed 1 --seeds "$reverted_seeds" \
		--steps "$steps" --quiet --shrink-ms 10000 --script "$work/$d.replay.sql"
	# the failing step, the shrunk history (its first steps; all of it is in
	# the replay script), the drain that follows it
	echo "$out" | grep -E "violated at step|shrunk to" || true
	echo "$out" | grep -E "^ +[0-9]+ s[0-9]" | head -12 || true
	echo "$out" | grep -E "then the fair drain" || true
done

# 4. the relay's pipeline slots (relay/slot.h) driven through a simulated
# transport (--drive slots, tests/check/slot_drive.c): no violation as they
# are; with the shared-outcomes defect put back (outbox-check-shared-outcomes,
# relay/slot.c's fix reverted at build time by tests/check.cmake) the driver
# must find it within CHECK_REVERTED_SEEDS seeds
slot_seeds=${CHECK_SLOT_SEEDS:-60}
say "outbox-check --drive slots: seeds 1..$slot_seeds x 400 steps"
"$bin/outbox-check" --db "$db" --drive slots --seed 1 --seeds "$slot_seeds" --steps 400 --quiet ||
	failed=1
say "outbox-check --drive slots with the shared-outcomes defect put back"
expect_violation "the shared-outcomes defect" outbox-check-shared-outcomes --drive slots \
	--seed 1 --seeds "$reverted_seeds" --steps 400 --quiet
# the violation and the steps just before it
echo "$out" | grep -E "violated at step" || true
echo "$out" | grep -E "^ +[0-9]+ " | tail -12 || true

# 5. the inbox's driver: the functions as they are, then broken variants
say "outbox-check --inbox: seeds 1..$inbox_seeds x $inbox_steps steps"
"$bin/outbox-check" --db "$db" --inbox "$inbox_seeds" --steps "$inbox_steps" --quiet ||
	failed=1
ifns=$src/sql/inbox/functions
break_inbox() { # NAME FILE PERL-EXPRESSION: DIR/FILE is FILE broken
	local dir=$work/$1 file=$2
	mkdir -p "$dir"
	cp "$ifns/$file" "$dir/$file"
	perl -0pi -e "$3" "$dir/$file"
	if cmp -s "$dir/$file" "$ifns/$file"; then
		say "the break $1 no longer changes $file: update tests/check/run.sh"
		failed=1
	fi
}
# i1: a named source no longer inherits the records of '', nor '' theirs
break_inbox i1 dedup_record.sql 's/ OR \(p\.source = \x27\x27\) <> \(dedup_record\.source = \x27\x27\)//'
# i2: a record purged once applied long enough ago, whatever its message's time
break_inbox i2 purge.sql 's/\s*AND \(p\.created_at IS NULL\s+OR p\.created_at < now\(\) - \(retention_ms \+ margin_ms\) \* interval \x271 millisecond\x27\)//'
# i3: the empty source takes no gate
break_inbox i3 take_source_gate.sql 's/LOCK TABLE inbox\.source_gate IN SHARE MODE;/NULL;/'
for d in i1 i2 i3; do
	say "outbox-check --inbox with $d (--functions $d)"
	expect_violation "$d" outbox-check --functions "$work/$d" --inbox "$reverted_seeds" \
		--steps "$inbox_steps" --quiet
	echo "$out" | grep -E "VIOLATION|violated at step" || true
done
[ "$failed" -eq 0 ] || exit 1
say "every reverted defect and every broken inbox variant found"
