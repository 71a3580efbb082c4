/*
 * ready_file.h - the --ready-file of a serving program: once it listens,
 * it writes the URL it serves on (with the port actually bound, so that
 * port 0 is usable) into a file a test, bench or supervisor waits for.
 *
 * The file appears whole or not at all: it is written to a temporary file
 * next to it and renamed into place, so a reader polling for it never sees
 * a partial URL.
 */
#ifndef OUTBOX_READY_FILE_H
#define OUTBOX_READY_FILE_H

#include <stddef.h>

/* Write url and a newline to path atomically (a temp file in the same
 * directory, then rename(2); an existing file is replaced). Blocks on the
 * file system only. OB_OK, or OB_EINVAL with one line in err naming the
 * path and the reason (e.g. the directory does not exist); no temp file is
 * left behind on failure. Both strings are borrowed. */
int ob_ready_file_write(const char *path, const char *url, char *err, size_t errlen);

#endif
