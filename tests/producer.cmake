# The producer's HTTP API, agent-side client and fault matrix (issue 5).
outbox_test(test_producer_input SOURCES unit/test_producer_input.c LABELS unit
  LIBS outbox_producer)
outbox_test(test_producer_api SOURCES integration/test_producer_api.c LABELS integration PG
  TIMEOUT 300 LIBS outbox_producer)
outbox_test(test_producer_client SOURCES integration/test_producer_client.c
  LABELS integration PG TIMEOUT 300 LIBS outbox_producer)
outbox_test(test_producer_matrix SOURCES integration/test_producer_matrix.c
  LABELS integration PG TIMEOUT 600 LIBS outbox_producer)
