# tools/herd/: outbox-herd, the thundering-herd simulation. The strategies'
# formulas, the event queue, a run as a function of its seed, the blog's
# conclusions for the fixed seed, and the program (same seed, same bytes;
# bad flags exit 2), in a few seconds.
outbox_test(test_herd SOURCES unit/test_herd.c LABELS unit TIMEOUT 120 LIBS outbox_herdlib)
if(TARGET test_herd)
  # the test runs the program
  add_dependencies(test_herd outbox-herd)
endif()
# outbox-herd --target, the strategies against the real system: its own
# PostgreSQL killed for 2 s under a real producer and 20 clients, once per
# strategy (no backoff, exponential, Full Jitter); the mode's flags and a
# target that refuses. About 20 s.
outbox_test(test_herd_target SOURCES integration/test_herd_target.c LABELS integration
  TIMEOUT 180 LIBS outbox_herdlib)
if(TARGET test_herd_target)
  add_dependencies(test_herd_target outbox-herd outbox-producer)
endif()
