/*
 * testsupport.c - helpers shared by the Check suites.
 */
#include <stdlib.h>

#include "testsupport.h"

int
ts_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
