/*
 * inbox_drive.h - the checker's inbox driver (outbox-check --inbox N): the
 * inbox's SQL contract (sql/inbox/functions/, docs/inbox-sql.md) driven
 * through seeded interleavings of consumers of three source kinds, an
 * operator's purge and time passing (inbox_drive.c says how).
 */
#ifndef OUTBOX_CHECK_INBOX_DRIVE_H
#define OUTBOX_CHECK_INBOX_DRIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"

/* Run seeds seed .. seed+seeds-1 of steps steps each on db (migrated, the
 * inbox set included), checking the invariants after every step. Prints a
 * line per seed unless quiet, and the history of the first violation.
 * Returns 0 (no violation), 1 (a violation) or 2 (the driver failed). */
int chk_inbox_run(struct chk_db *db, uint64_t seed, int seeds, int steps, bool quiet);

#endif
