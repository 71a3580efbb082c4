#!/usr/bin/env bash
# slot_writers_negative.sh - scripts/check-slot-writers.sh must go red on a
# pipeline slot's or a breaker's field written outside its owner before its
# green on the real tree means anything: copy the sources into a scratch
# tree, add one stray write at a time, expect the check to fail naming the
# file, the function and the field.
set -uo pipefail
check=$(cd "$(dirname "$0")/../.." && pwd)/scripts/check-slot-writers.sh
copy="common producer relay consumer ctl tools tests"
. "$(dirname "$0")/negative_lib.sh"
negative_start

# the worker freeing a slot behind the state machine's back
fresh; cat >>"$scratch/t/relay/worker.c" <<'C'
static void
stray_free(struct relay_slot *s)
{
	s->state = RELAY_SLOT_FREE;
}
C
expect "slot state written by the worker" \
	"relay/worker.c: stray_free writes a slot field (state), which only relay_slots_fini, relay_slots_init, slot_enter in relay/slot.c may write"

# a second writer inside slot.c itself, through the slots' array
fresh; cat >>"$scratch/t/relay/slot.c" <<'C'
void
relay_slot_rewind(struct relay_slots *p, uint32_t i)
{
	p->slot[i].gate_until_ms = 0;
}
C
expect "slot field written by another function of slot.c" \
	"relay/slot.c: relay_slot_rewind writes a slot field (gate_until_ms)"

# the worker counting its slots itself (the counts are the machine's)
fresh; cat >>"$scratch/t/relay/worker.c" <<'C'
static void
stray_count(struct worker *w)
{
	w->slots.used--;
}
C
expect "slots' count written by the worker" "relay/worker.c: stray_count writes a slots field (used)"

# the checker handing a slot its outcomes: the shared-outcomes defect by hand
fresh; cat >>"$scratch/t/tests/check/slot_drive.c" <<'C'
static void
stray_share(struct relay_slots *p)
{
	for (uint32_t i = 1; i < p->n; i++)
		p->slot[i].outcomes = p->slot[0].outcomes;
}
C
expect "slot outcomes written by the checker" \
	"tests/check/slot_drive.c: stray_share writes a slot field (outcomes)"

# a slot wiped with memset outside its owner
fresh; cat >>"$scratch/t/relay/worker.c" <<'C'
static void
stray_wipe(struct relay_slot *s)
{
	memset(s, 0, sizeof(*s));
}
C
expect "slot cleared by the worker" "relay/worker.c: stray_wipe clears a slot"

# deliver.c ending a probe's reservation by hand (as it did before 6118345)
fresh; cat >>"$scratch/t/relay/deliver.c" <<'C'
static void
stray_probe_end(struct relay_dest *ds)
{
	ds->breaker.probing = false;
}
C
expect "breaker field written by deliver.c" \
	"relay/deliver.c: stray_probe_end writes a breaker field (probing), which only relay/breaker.c may write"

# dest.c counting a failure itself, through a breaker variable
fresh; cat >>"$scratch/t/relay/dest.c" <<'C'
static void
stray_fail(struct relay_dest_table *t, int i)
{
	struct relay_breaker *b = &t->dest[i].breaker;
	++b->failures;
}
C
expect "breaker failures counted by dest.c" "relay/dest.c: stray_fail writes a breaker field (failures)"

negative_end slot_writers_negative
