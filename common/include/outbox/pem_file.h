/*
 * pem_file.h - the start-up check of a certificate, key or CA file named
 * by a TLS flag, shared by the bus's TLS (bus_tls.c) and HTTPS
 * (httpd_tls.c): the same file makes the same one-line error whichever
 * listener or dialer it is for.
 */
#ifndef OUTBOX_PEM_FILE_H
#define OUTBOX_PEM_FILE_H

#include <stddef.h>

/* A certificate, key or CA file larger than this is refused (a PEM chain
 * is a few kB; this only stops a wrong path from being read whole). */
#define OB_PEM_FILE_MAX (1024 * 1024)

/* OB_OK if path names a readable regular file of at most OB_PEM_FILE_MAX
 * bytes; else OB_EINVAL with one line in err naming flag ("--tls-cert"),
 * the path and why. Does not parse the file. Borrows both strings. */
int ob_pem_file_check(const char *flag, const char *path, char *err, size_t errlen);

#endif
