/*
 * secret_file.c - a file of secrets read one line at a time
 * (secret_file.h). The line buffer is the caller's, so that it is sized
 * for its file and wiped (explicit_bzero) where its contents were seen.
 */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/secret_file.h"

int
ob_secret_file_open(struct ob_secret_file *sf, const char *flag, const char *path, int max,
    const char *trim, size_t holder_size, void **holder, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		snprintf(err, errlen, "%s %s: %s", flag, path, strerror(errno));
		return OB_EINVAL;
	}
	if ((*holder = calloc(1, holder_size)) == NULL) {
		fclose(f);
		snprintf(err, errlen, "out of memory");
		return OB_ENOMEM;
	}
	*sf = (struct ob_secret_file){ f, flag, path, max, trim, 0 };
	return OB_OK;
}

int
ob_secret_file_next(struct ob_secret_file *sf, char *line, size_t size, char *err,
    size_t errlen)
{
	while (fgets(line, (int)size, sf->f) != NULL) {
		sf->lineno++;
		size_t n = strlen(line);
		if (n == size - 1 && line[n - 1] != '\n') {
			snprintf(err, errlen, "%s %s line %d: longer than %d bytes", sf->flag, sf->path,
			    sf->lineno, sf->max);
			return -1;
		}
		while (n > 0 && strchr(sf->trim, line[n - 1]) != NULL)
			line[--n] = '\0';
		if (n > 0 && line[0] != '#')
			return (int)n;
	}
	if (ferror(sf->f)) {
		snprintf(err, errlen, "%s %s: %s", sf->flag, sf->path, strerror(errno));
		return -1;
	}
	return 0;
}

void
ob_secret_file_close(struct ob_secret_file *sf, char *line, size_t size)
{
	if (line != NULL)
		explicit_bzero(line, size);
	fclose(sf->f);
	sf->f = NULL;
}

void
ob_secret_free(void *p, size_t size)
{
	if (p == NULL)
		return;
	explicit_bzero(p, size);
	free(p);
}
