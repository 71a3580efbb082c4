/*
 * test_ready_file.c - ob_ready_file_write: the file holds the URL and a
 * newline, replaces an older one, leaves no temp file behind, and a path
 * that cannot be written (no such directory, a name too long) is OB_EINVAL
 * with the path in the reason and nothing created.
 */
#include <dirent.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "outbox/err.h"
#include "outbox/ready_file.h"
#include "testsupport.h"

/* Entries in dir other than . and .. */
static int
entries(const char *dir)
{
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	closedir(d);
	return n;
}

START_TEST(test_write_and_replace)
{
	char dir[300], path[320], err[512];
	snprintf(dir, sizeof(dir), "%s/ok", ts_tmpdir());
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/ready", dir);

	ck_assert_int_eq(ob_ready_file_write(path, "tcp://127.0.0.1:41873", err, sizeof(err)),
	    OB_OK);
	char *text = ts_read_file(path);
	ck_assert_str_eq(text, "tcp://127.0.0.1:41873\n");
	free(text);
	ck_assert_int_eq(entries(dir), 1);

	/* A second write replaces the first whole. */
	ck_assert_int_eq(ob_ready_file_write(path, "ipc:///x.ipc", err, sizeof(err)), OB_OK);
	text = ts_read_file(path);
	ck_assert_str_eq(text, "ipc:///x.ipc\n");
	free(text);
	ck_assert_int_eq(entries(dir), 1);
}
END_TEST

START_TEST(test_unwritable)
{
	char path[320], err[512];
	snprintf(path, sizeof(path), "%s/no-such-dir/ready", ts_tmpdir());
	strcpy(err, "untouched");
	ck_assert_int_eq(ob_ready_file_write(path, "tcp://127.0.0.1:1", err, sizeof(err)),
	    OB_EINVAL);
	ck_assert_msg(strstr(err, path) != NULL, "%s", err);
	ck_assert_msg(strstr(err, "No such file or directory") != NULL, "%s", err);
	ck_assert_ptr_null(ts_read_file(path));

	/* A path whose temp name would not fit. */
	static char longpath[5000], longerr[6000];
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	ck_assert_int_eq(ob_ready_file_write(longpath, "tcp://127.0.0.1:1", longerr,
	    sizeof(longerr)), OB_EINVAL);
	ck_assert_msg(strstr(longerr, ": path too long") != NULL, "%s", longerr);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("ready_file");
	TCase *tc = tcase_create("ready_file");
	tcase_add_test(tc, test_write_and_replace);
	tcase_add_test(tc, test_unwritable);
	suite_add_tcase(s, tc);
	return ts_run_suite(s);
}
