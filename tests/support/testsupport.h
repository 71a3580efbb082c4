/*
 * testsupport.h - helpers shared by the Check suites: a fresh database per
 * test on the throwaway PostgreSQL, child processes, temp dirs.
 */
#ifndef OUTBOX_TESTSUPPORT_H
#define OUTBOX_TESTSUPPORT_H

#include <check.h>

/* Run every suite in s with CK_ENV verbosity; returns the process exit code. */
int ts_run_suite(Suite *s);

#endif
