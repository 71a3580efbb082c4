# relay-proof area: the fault matrix (run through the demo program
# outbox-fault-matrix) and the chaos test, against the real relay and
# consumer. The chaos test starts its own PostgreSQL (it restarts it), so it
# does not need the shared fixture.
outbox_test(test_faultmatrix SOURCES integration/test_faultmatrix.c
  LABELS integration PG TIMEOUT 900)
if(TARGET test_faultmatrix)
  add_dependencies(test_faultmatrix outbox-fault-matrix outbox-relay outbox-consumer)
endif()
# Starts and restarts its own PostgreSQL: no fixture needed.
outbox_test(test_chaos SOURCES integration/test_chaos.c
  LABELS integration TIMEOUT 900)
if(TARGET test_chaos)
  add_dependencies(test_chaos outbox-relay outbox-consumer)
endif()
