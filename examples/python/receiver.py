#!/usr/bin/python3
"""receiver.py - a service receiving the outbox's webhook and applying its
effect exactly once, in its OWN database (psycopg 3 and the standard
library only).

    receiver.py --db CONNINFO --secret-file FILE [--listen HOST:PORT]
                [--ready-file FILE] [--retention-ms MS] [--purge-interval-ms MS]

Point `outbox-consumer --handler webhook --webhook-url http://HOST:PORT/
--webhook-secret-file FILE` at it. For every POST it

1. verifies `Outbox-Signature` (t=UNIX,v1=HEX,...: HMAC-SHA256 of
   "t.body" under any secret of the file, at most 5 minutes old): 401
   otherwise;
2. in ONE transaction of its database: refuses a message older than the
   retention (Outbox-Created-At, by the database's clock: its key's record
   may have been purged), asks the inbox's SQL contract whether this
   message is new (inbox.dedup_lookup, with the call's Outbox-Fence),
   writes its effect (a row of sent_emails) and the dedup record
   (inbox.dedup_insert, with the message's created_at), and commits; the
   answer follows the commit.

A thread of its own deletes the records past the retention
(inbox.purge) every --purge-interval-ms: who frees the records.

Answers: 200 applied; 200 with Idempotent-Replayed: true for a duplicate;
409 for a stale fence (a consumer that lost its claim calling late); 422
for a key used with another payload, and for a message older than the
retention; 503 (Retry-After: 1) while another transaction holds the key;
400/401/413 for bad requests. The database needs `outboxctl migrate
--schema inbox` and examples/mailer.sql.
"""
import argparse
import hashlib
import hmac
import json
import os
import signal
import sys
import threading
import time
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
from psycopg import errors

MAX_BODY = 1 << 20          # bytes of a request body
SIGNATURE_TOLERANCE_S = 300  # how old a signature's t may be
ATTEMPTS = 2                 # a record committed by another request first: ask again
RETENTION_MIN_MS = 60_000    # inbox.purge refuses less
RETENTION_MARGIN_MS = 3_600_000  # purge: the message older than retention + this
PURGE_BATCH = 1000           # records per inbox.purge call


def signature_ok(header, body, secrets, now):
    """Outbox-Signature: t=UNIX,v1=HEX[,v1=HEX...] over f"{t}.{body}"."""
    if not header:
        return False
    t, sigs = None, []
    for part in header.split(","):
        k, _, v = part.strip().partition("=")
        if k == "t":
            t = v
        elif k == "v1":
            sigs.append(v)
    if t is None or not t.isdigit() or abs(now - int(t)) > SIGNATURE_TOLERANCE_S:
        return False
    signed = t.encode() + b"." + body
    for secret in secrets:
        want = hmac.new(secret, signed, hashlib.sha256).hexdigest()
        if any(hmac.compare_digest(want, s) for s in sigs):
            return True
    return False


def apply_once(conn, topic, key, body, fence, message_id, created_at, retention_ms):
    """'applied', 'duplicate', 'stale', 'mismatch', 'too_old' or 'busy'."""
    for _ in range(ATTEMPTS):
        try:
            with conn.transaction():
                # a message older than the retention may be a redelivery
                # of a key whose record was purged: never applied
                if conn.execute(
                        "SELECT %s::timestamptz < clock_timestamp()"
                        " - %s * interval '1 millisecond'",
                        (created_at, retention_ms)).fetchone()[0]:
                    return "too_old"
                conn.execute("SELECT inbox.take_source_gate(source => '')")
                verdict = conn.execute(
                    "SELECT verdict FROM inbox.dedup_lookup(source => '', topic => %s,"
                    " idempotency_key => %s, payload => %s, fence => %s)",
                    (topic, key, body, fence)).fetchone()[0]
                if verdict != "new":
                    return verdict
                # the effect: a row of this service's own table (the email
                # to send), committed with the record or not at all
                conn.execute(
                    "INSERT INTO sent_emails (idempotency_key, payload)"
                    " VALUES (%s, convert_from(%s, 'UTF8')::jsonb)", (key, body))
                conn.execute(
                    "SELECT inbox.dedup_insert(source => '', topic => %s,"
                    " idempotency_key => %s, payload => %s, message_id => %s,"
                    " fence => %s, created_at => %s, detail => NULL)",
                    (topic, key, body, message_id, fence or 0, created_at))
                return "applied"
        except errors.UniqueViolation:
            continue  # another request committed this key first: ask again
        except errors.LockNotAvailable:
            return "busy"
    return "busy"


class Receiver(BaseHTTPRequestHandler):
    server_version = "outbox-example-receiver"

    def answer(self, status, doc, headers=()):
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def conn(self):
        """One database connection per serving thread, made on first use."""
        local = self.server.local
        if getattr(local, "conn", None) is None or local.conn.closed:
            # prepare_threshold=None: psycopg prepares a statement run 5
            # times, which PgBouncer before 1.21 in transaction mode loses
            # between transactions; unprepared works direct and pooled
            local.conn = psycopg.connect(self.server.db, prepare_threshold=None)
        return local.conn

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413, {"error": "body too large"})
        body = self.rfile.read(length)
        if not signature_ok(self.headers.get("Outbox-Signature"), body,
                            self.server.secrets, int(time.time())):
            return self.answer(401, {"error": "bad or missing Outbox-Signature"})
        key = self.headers.get("Idempotency-Key")
        topic = self.headers.get("Outbox-Topic") or ""
        try:
            fence = int(self.headers["Outbox-Fence"]) if "Outbox-Fence" in self.headers else None
            message_id = int(self.headers.get("Outbox-Message-Id") or 0)
        except ValueError:
            return self.answer(400, {"error": "Outbox-Fence and Outbox-Message-Id are numbers"})
        if not key or not topic:
            return self.answer(400, {"error": "Idempotency-Key and Outbox-Topic are required"})
        # the message's enqueue time (RFC 3339); a consumer before it sent
        # none: then the time of receipt
        created_at = self.headers.get("Outbox-Created-At")
        try:
            created_at = datetime.fromisoformat(created_at).isoformat() if created_at else None
        except ValueError:
            return self.answer(400, {"error": "Outbox-Created-At is not an RFC 3339 time"})
        created_at = created_at or datetime.now().astimezone().isoformat()
        try:
            verdict = apply_once(self.conn(), topic, key, body, fence, message_id,
                                 created_at, self.server.retention_ms)
        except errors.DataError:
            return self.answer(400, {"error": "the body is not UTF-8 JSON"})
        except psycopg.Error as e:
            self.log_message("database: %s", e)
            return self.answer(503, {"error": "database unavailable"}, [("Retry-After", "1")])
        print(f"receiver.py: POST {key} {verdict}", file=sys.stderr, flush=True)
        if verdict == "applied":
            return self.answer(200, {"key": key, "replayed": False})
        if verdict == "duplicate":
            return self.answer(200, {"key": key, "replayed": True},
                               [("Idempotent-Replayed", "true")])
        if verdict == "stale":
            return self.answer(409, {"error": "stale_fence", "key": key})
        if verdict == "mismatch":
            return self.answer(422, {"error": "key used with another payload", "key": key})
        if verdict == "too_old":
            return self.answer(422, {"error": "older than the retention", "key": key})
        return self.answer(503, {"error": "busy"}, [("Retry-After", "1")])


def purge_forever(db, retention_ms, interval_ms):
    """Delete the records past the retention, in short transactions, every
    interval_ms; a failure is logged and tried again at the next turn."""
    conn = None
    while True:
        try:
            if conn is None or conn.closed:
                conn = psycopg.connect(db, prepare_threshold=None, autocommit=True)
            n = PURGE_BATCH
            while n == PURGE_BATCH:
                n = conn.execute("SELECT inbox.purge(%s, %s, %s)",
                                 (retention_ms, RETENTION_MARGIN_MS, PURGE_BATCH)).fetchone()[0]
                if n:
                    print(f"receiver.py: purged {n} records", file=sys.stderr, flush=True)
        except psycopg.Error as e:
            print(f"receiver.py: purge: {e}", file=sys.stderr, flush=True)
        time.sleep(interval_ms / 1000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="the service's PostgreSQL (conninfo)")
    ap.add_argument("--secret-file", required=True,
                    help="the consumer's --webhook-secret-file: one secret per line")
    ap.add_argument("--listen", default="127.0.0.1:8095", help="HOST:PORT (port 0: any)")
    ap.add_argument("--ready-file", help="write http://HOST:PORT/ here once listening")
    ap.add_argument("--retention-ms", type=int, default=7 * 86_400_000,
                    help="keep a record this long; older messages are refused (default 7 days,"
                         " at least 60000; the consumer's --dedup-retention rule)")
    ap.add_argument("--purge-interval-ms", type=int, default=60_000,
                    help="delete expired records this often (default 60000)")
    a = ap.parse_args()
    if a.retention_ms < RETENTION_MIN_MS or a.purge_interval_ms < 100:
        print("receiver.py: --retention-ms is at least 60000, --purge-interval-ms at least 100",
              file=sys.stderr)
        return 2
    with open(a.secret_file, "rb") as f:
        secrets = [line.strip() for line in f if line.strip()]
    if not secrets:
        print(f"receiver.py: {a.secret_file} holds no secret", file=sys.stderr)
        return 2
    host, _, port = a.listen.rpartition(":")
    server = ThreadingHTTPServer((host, int(port)), Receiver)
    server.daemon_threads = True
    server.db, server.secrets, server.local = a.db, secrets, threading.local()
    server.retention_ms = a.retention_ms
    threading.Thread(target=purge_forever, args=(a.db, a.retention_ms, a.purge_interval_ms),
                     daemon=True).start()
    url = f"http://{host}:{server.server_address[1]}/"
    if a.ready_file:  # written whole, then renamed: a reader never sees half
        with open(a.ready_file + ".tmp", "w") as f:
            f.write(url + "\n")
        os.replace(a.ready_file + ".tmp", a.ready_file)
    print(f"receiver.py: listening on {url}", file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
