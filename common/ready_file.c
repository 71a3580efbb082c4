/*
 * ready_file.c - write a serving program's --ready-file atomically.
 *
 * Owns nothing past the call. The temp name carries the pid so that two
 * processes given the same path never write into each other's temp file;
 * the rename is what publishes the URL.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outbox/err.h"
#include "outbox/ready_file.h"

int
ob_ready_file_write(const char *path, const char *url, char *err, size_t errlen)
{
	char tmp[4096];
	int n = snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return OB_EINVAL;
	}
	FILE *f = fopen(tmp, "w");
	if (f == NULL) { /* the temp file is in path's directory: same reason */
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return OB_EINVAL;
	}
	bool ok = fprintf(f, "%s\n", url) >= 0;
	int saved = errno;
	if (fclose(f) != 0 && ok) {
		ok = false;
		saved = errno;
	}
	if (!ok) {
		snprintf(err, errlen, "%s: writing %s: %s", path, tmp, strerror(saved));
		unlink(tmp);
		return OB_EINVAL;
	}
	if (rename(tmp, path) != 0) {
		snprintf(err, errlen, "%s: renaming %s into place: %s", path, tmp, strerror(errno));
		unlink(tmp);
		return OB_EINVAL;
	}
	return OB_OK;
}
