/*
 * pem_file.c - is the file a TLS flag names worth handing to a PEM parser
 * (pem_file.h)? Looked at (stat) before it is opened, so that a FIFO or a
 * device named by mistake is refused rather than blocked on. Never reads
 * the contents or logs; the one line goes into the caller's buffer.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "outbox/err.h"
#include "outbox/pem_file.h"

int
ob_pem_file_check(const char *flag, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (path == NULL || path[0] == '\0') {
		snprintf(err, errlen, "%s: no file given", flag);
		return OB_EINVAL;
	}
	if (stat(path, &st) != 0) {
		snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
		return OB_EINVAL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s %s: not a regular file", flag, path);
		return OB_EINVAL;
	}
	if (st.st_size > OB_PEM_FILE_MAX) {
		snprintf(err, errlen, "%s %s: larger than %d bytes, not a PEM file", flag, path,
		    OB_PEM_FILE_MAX);
		return OB_EINVAL;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
		return OB_EINVAL;
	}
	fclose(f);
	return OB_OK;
}
