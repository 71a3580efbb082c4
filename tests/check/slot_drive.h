/*
 * slot_drive.h - the checker's driver of the relay's pipeline slots
 * (outbox-check --drive slots; slot_drive.c says what it does).
 */
#ifndef OUTBOX_CHECK_SLOT_DRIVE_H
#define OUTBOX_CHECK_SLOT_DRIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "check.h"

/* Run seeds seed .. seed+seeds-1 of steps steps each on db (set up by
 * main.c: migrated, its relay login role made). Prints a line per seed
 * unless quiet, and the first violation with the steps that led to it.
 * 0: no violation; 1: a violation; 2: the checker failed (no database). */
int chk_slot_drive(struct chk_db *db, uint64_t seed, int seeds, int steps, bool quiet);

#endif
