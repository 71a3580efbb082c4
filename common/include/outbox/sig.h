/*
 * sig.h - the one signal layer of every long-running program: a count per
 * signal and a self-pipe, so that a program waits on signals in its own
 * loop (poll the pipe) and never does work in a handler.
 *
 *   SIGTERM, SIGINT  a graceful stop (ob_sig_stops counts both); with
 *                    ob_sig_exit_on_second_stop, the second one exits at
 *                    once from the handler (a stop that hangs can always
 *                    be cut short);
 *   SIGHUP           a reload (ob_sig_reloads): the program re-reads its
 *                    settings (ob_cfg_reload) and keeps running;
 *   SIGPIPE          ignored (a peer that went away is an error return).
 *
 * Handlers are installed with SA_RESTART, in every thread's name: a signal
 * may run in any thread, and only counts, writes one byte to the pipe and
 * (escalation) writes one line and _exits. After fork() a child calls
 * ob_sig_init again: it gets its own pipe and counts from zero.
 */
#ifndef OUTBOX_SIG_H
#define OUTBOX_SIG_H
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit code of the immediate exit on a second stop signal. */
#define OB_SIG_EXIT_SECOND 3

/* Install the handlers and make the pipe (closing a previous one, as in a
 * child after fork). program prefixes the line written on an immediate
 * exit. OB_OK, or OB_EINVAL with the reason in err. */
int ob_sig_init(const char *program, char *err, size_t errlen);

/* Count sig too (and wake the pipe): the relay's supervisor watches
 * SIGCHLD. Restored to the default by the next ob_sig_init. */
int ob_sig_watch(int sig, char *err, size_t errlen);

/* From now on a second SIGTERM/SIGINT exits at once with
 * OB_SIG_EXIT_SECOND, after one line on stderr. */
void ob_sig_exit_on_second_stop(void);

/* SIGTERM + SIGINT received so far. */
unsigned ob_sig_stops(void);
/* SIGHUP received so far. */
unsigned ob_sig_reloads(void);
/* Times sig (a watched one) was received so far. */
unsigned ob_sig_count(int sig);

/* The first stop signal's number, 0 before one: for loops that take a
 * flag (the relay's workers). */
volatile sig_atomic_t *ob_sig_stop_flag(void);

/* The read end of the self-pipe (nonblocking): readable after a signal. */
int ob_sig_fd(void);
/* Empty the pipe (after poll said it is readable). */
void ob_sig_drain(void);
/* Wait up to ms (-1: no limit) for a signal; true when one came. */
bool ob_sig_wait(int64_t ms);

#endif
