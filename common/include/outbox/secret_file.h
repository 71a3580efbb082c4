/*
 * secret_file.h - reading a file of secrets one line at a time, as the
 * producer's --api-token-file and the consumer's --webhook-secret-file
 * are read: empty lines and '#' comments skipped, a line longer than the
 * file allows refused with its number, a read error reported, and the
 * caller's line buffer wiped at the end. What a line means is the
 * caller's. Nothing here logs or keeps a copy of a line.
 */
#ifndef OUTBOX_SECRET_FILE_H
#define OUTBOX_SECRET_FILE_H

#include <stddef.h>
#include <stdio.h>

struct ob_secret_file {
	FILE *f;
	const char *flag; /* "--api-token-file": starts every error line */
	const char *path;
	int max;          /* the longest line, as error lines state it */
	const char *trim; /* characters cut from the end of a line: "\r\n", ... */
	int lineno;       /* of the line last read */
};

/* Open path for ob_secret_file_next (flag, path and trim borrowed: they
 * must outlive sf), and the caller's holder of what the file says, zeroed,
 * holder_size bytes in *holder (let go with ob_secret_free). OB_OK, or
 * OB_EINVAL with "FLAG PATH: reason" in err, OB_ENOMEM: nothing open,
 * nothing allocated. */
int ob_secret_file_open(struct ob_secret_file *sf, const char *flag, const char *path,
    int max, const char *trim, size_t holder_size, void **holder, char *err, size_t errlen);

/* The next line that is neither empty nor a comment ('#' first), once the
 * characters of sf->trim are cut from its end, into line (size bytes: a
 * line that fills it without its newline is too long): its length; 0 at
 * the end of the file; -1 with one line in err, "FLAG PATH line N: longer
 * than MAX bytes" or, on a read error, "FLAG PATH: reason". */
int ob_secret_file_next(struct ob_secret_file *sf, char *line, size_t size, char *err,
    size_t errlen);

/* Wipe line[0..size) (NULL is ok) and close the file. */
void ob_secret_file_close(struct ob_secret_file *sf, char *line, size_t size);

/* Wipe p[0..size) and free it: how a heap block that held secrets read
 * from such a file (tokens, signing keys) is let go. NULL is ok. */
void ob_secret_free(void *p, size_t size);

#endif
