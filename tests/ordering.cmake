# Per-key ordering (issue 7): failing head, dead head block/skip, takeover.
outbox_test(test_ordering SOURCES integration/test_ordering.c LABELS integration PG TIMEOUT 600)
