#!/usr/bin/python3
"""place_order.py - a service writing its business row and its outbox
message in ONE transaction (psycopg 3, Debian's python3-psycopg).

    place_order.py --db CONNINFO --order ID --customer NAME --total AMOUNT

Prints the message id. The order row and the message commit together or not
at all; a relay delivers the message after COMMIT. Run it again with the
same arguments: the same id, nothing new (outbox.enqueue is idempotent per
(topic, key), and the order row is written once). Run it with the same
order and another total: the key was already announced with another
payload, SQLSTATE OB002; the savepoint around the enqueue keeps the rest of
the transaction, and the script says so and exits 3.
"""
import argparse
import json
import sys

import psycopg

TOPIC = "order.placed"


def place_order(conn, order_id, customer, total):
    """The order and its message in one transaction; the message id, or
    None when its key was used before with another payload (OB002)."""
    payload = {"order_id": order_id, "customer": customer, "total": total}
    with conn.transaction():
        conn.execute(
            "INSERT INTO shop_orders (id, customer, total) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO NOTHING",
            (order_id, customer, total))
        try:
            # A savepoint: an OB002 undoes the enqueue only, not the order.
            with conn.transaction():
                row = conn.execute(
                    "SELECT outbox.enqueue(%s, %s, %s::jsonb)",
                    (TOPIC, f"order-{order_id}", json.dumps(payload))).fetchone()
                return row[0]
        except psycopg.Error as e:
            if e.sqlstate == "OB002":
                return None
            raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True, help="the service's PostgreSQL (conninfo)")
    ap.add_argument("--order", type=int, required=True)
    ap.add_argument("--customer", required=True)
    ap.add_argument("--total", required=True, help="an amount, as text: 19.90")
    a = ap.parse_args()
    # prepare_threshold=None: no server-side prepared statements, which
    # PgBouncer before 1.21 loses between transactions in transaction mode
    with psycopg.connect(a.db, prepare_threshold=None) as conn:
        message_id = place_order(conn, a.order, a.customer, a.total)
    if message_id is None:
        print(f"order {a.order}: already announced with another payload (OB002):"
              " not announced again", file=sys.stderr)
        return 3
    print(f"order {a.order}: message {message_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
