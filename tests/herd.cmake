# tools/herd/: outbox-herd, the thundering-herd simulation. The strategies'
# formulas, the event queue, a run as a function of its seed, the blog's
# conclusions for the fixed seed, and the program (same seed, same bytes;
# bad flags exit 2), in a few seconds.
outbox_test(test_herd SOURCES unit/test_herd.c LABELS unit TIMEOUT 120 LIBS outbox_herdlib)
if(TARGET test_herd)
  # the test runs the program
  add_dependencies(test_herd outbox-herd)
endif()
