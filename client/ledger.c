/*
 * ledger.c - the append-only tool ledger (see ledger.h). One write(2) per
 * line on an O_APPEND descriptor, then fsync; a file just created also has
 * its directory fsynced, so that the entry survives a power cut.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "ledger.h"
#include "outbox/clock.h"
#include "outbox/err.h"

static void
fsync_dir(const char *path)
{
	char *copy = strdup(path);
	if (copy == NULL)
		return;
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	free(copy);
}

int
ledger_append(const char *path, const char *tool, const char *key, const char *state,
    const json_t *extra, char *err, size_t errlen)
{
	char ts[OB_WALL_ISO_LEN];
	ob_wall_iso(ts);
	json_t *o = json_pack("{s:s,s:s,s:s,s:s}", "ts", ts, "tool", tool, "key", key, "state",
	    state);
	if (o == NULL) {
		snprintf(err, errlen, "ledger: out of memory");
		return OB_ENOMEM;
	}
	if (json_is_object(extra))
		json_object_update(o, (json_t *)extra);
	char *line = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (line == NULL) {
		snprintf(err, errlen, "ledger: out of memory");
		return OB_ENOMEM;
	}
	size_t len = strlen(line), n = len + 1;
	char *buf = malloc(n);
	if (buf == NULL) {
		free(line);
		snprintf(err, errlen, "ledger: out of memory");
		return OB_ENOMEM;
	}
	memcpy(buf, line, len);
	buf[len] = '\n';
	free(line);

	struct stat st;
	bool created = stat(path, &st) != 0;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	int rc = OB_OK;
	if (fd < 0) {
		snprintf(err, errlen, "ledger %s: %s", path, strerror(errno));
		rc = OB_EINVAL;
	} else {
		ssize_t w = write(fd, buf, n);
		if (w != (ssize_t)n || fsync(fd) != 0) {
			snprintf(err, errlen, "ledger %s: write: %s", path,
			    w < 0 || w == (ssize_t)n ? strerror(errno) : "short write");
			rc = OB_EINVAL;
		}
		close(fd);
		if (rc == OB_OK && created)
			fsync_dir(path);
	}
	free(buf);
	return rc;
}

json_t *
ledger_entries(const char *path, const char *key, char *err, size_t errlen)
{
	json_t *all = json_array();
	if (all == NULL) {
		snprintf(err, errlen, "ledger: out of memory");
		return NULL;
	}
	FILE *f = fopen(path, "r");
	if (f == NULL) {
		if (errno == ENOENT)
			return all;
		snprintf(err, errlen, "ledger %s: %s", path, strerror(errno));
		json_decref(all);
		return NULL;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		if (n > LEDGER_MAX_LINE)
			continue;
		json_t *o = json_loadb(line, (size_t)n, 0, NULL);
		const char *k = json_string_value(json_object_get(o, "key"));
		if (k != NULL && strcmp(k, key) == 0)
			json_array_append(all, o);
		json_decref(o);
	}
	free(line);
	fclose(f);
	return all;
}

int
ledger_last_state(const char *path, const char *key, char *out, size_t outlen, char *err,
    size_t errlen)
{
	out[0] = '\0';
	json_t *all = ledger_entries(path, key, err, errlen);
	if (all == NULL)
		return OB_EINVAL;
	for (size_t i = json_array_size(all); i-- > 0;) {
		const char *s = json_string_value(json_object_get(json_array_get(all, i), "state"));
		if (s != NULL) {
			snprintf(out, outlen, "%s", s);
			break;
		}
	}
	json_decref(all);
	return OB_OK;
}
