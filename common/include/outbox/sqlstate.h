/*
 * sqlstate.h - the SQLSTATEs the programs act on, by name: one place that
 * says which database errors change what a program does. PostgreSQL's own
 * codes (its manual, Appendix A) and the one this project raises
 * (sql/outbox/functions/check_protocol.sql, check_same_payload.sql;
 * sql/inbox/functions/check_protocol.sql). Compare with ob_pg_sqlstate (pg.h).
 */
#ifndef OUTBOX_SQLSTATE_H
#define OUTBOX_SQLSTATE_H

#include <stdbool.h>
#include <string.h>

/* check_protocol's refusal: the schema does not serve this program's
 * protocol version (or its role lacks a grant). */
#define OB_SQLSTATE_PROTOCOL "OB001"
/* outbox.enqueue (check_same_payload): the key of this topic is taken by
 * a message with another payload. */
#define OB_SQLSTATE_KEY_REUSED "OB002"
/* A schema from before protocol versions: no check_protocol to call. */
#define OB_SQLSTATE_UNDEFINED_FUNCTION "42883"
#define OB_SQLSTATE_INVALID_SCHEMA_NAME "3F000"
/* a relation named is not there (the demo's tables where it is not installed) */
#define OB_SQLSTATE_UNDEFINED_TABLE "42P01"
/* CREATE OR REPLACE FUNCTION cannot change a return type (migrate then
 * drops and creates). */
#define OB_SQLSTATE_INVALID_FUNCTION_DEFINITION "42P13"
/* DEALLOCATE of a statement the session never prepared. */
#define OB_SQLSTATE_INVALID_SQL_STATEMENT_NAME "26000"
/* A key another transaction is applying: lock_timeout, or a deadlock. */
#define OB_SQLSTATE_LOCK_NOT_AVAILABLE "55P03"
#define OB_SQLSTATE_DEADLOCK_DETECTED "40P01"
/* inbox.dedup_insert: another transaction recorded the message since its
 * lookup (sql/inbox/functions/dedup_insert.sql). */
#define OB_SQLSTATE_UNIQUE_VIOLATION "23505"
/* A payload over outbox.max_payload_bytes(). */
#define OB_SQLSTATE_PROGRAM_LIMIT_EXCEEDED "54000"
/* Classes: the input was bad (data exception, integrity violation). */
#define OB_SQLSTATE_CLASS_DATA_EXCEPTION "22"
#define OB_SQLSTATE_CLASS_INTEGRITY_VIOLATION "23"

/* Whether state is code. */
static inline bool
ob_sqlstate_is(const char *state, const char *code)
{
	return strcmp(state, code) == 0;
}

/* Whether state is of class cls (its first two characters). */
static inline bool
ob_sqlstate_class(const char *state, const char *cls)
{
	return strncmp(state, cls, 2) == 0;
}

/* Bad input: a data exception or an integrity violation. */
static inline bool
ob_sqlstate_bad_input(const char *state)
{
	return ob_sqlstate_class(state, OB_SQLSTATE_CLASS_DATA_EXCEPTION) ||
	    ob_sqlstate_class(state, OB_SQLSTATE_CLASS_INTEGRITY_VIOLATION);
}

#endif
