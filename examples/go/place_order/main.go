// place_order - a service writing its business row and its outbox message
// in ONE transaction (pgx v4, Debian's golang-github-jackc-pgx-v4-dev).
//
//	place_order [--db CONNINFO] --order ID --customer NAME --total AMOUNT
//
// CONNINFO is libpq's: "host=... dbname=..." or postgresql://...; without
// --db, pgx connects by libpq's environment (PGHOST, PGPORT, PGDATABASE,
// PGUSER, PGPASSWORD). Prints the message id. The order row and the message
// commit together or not at all; a relay delivers the message after COMMIT.
// The same again: the same id, nothing new (outbox.enqueue is idempotent per
// (topic, key), and the order row is written once). The same order with
// another total: the key was already announced with another payload,
// SQLSTATE OB002; the savepoint around the enqueue keeps the rest of the
// transaction, and the program says so and exits 3.
//
// Build (offline, Debian's packages; examples/README.md):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o place_order ./examples/go/place_order
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgconn/stmtcache"
	"github.com/jackc/pgx/v4"
)

const topic = "order.placed"

// placeOrder writes the order and its message in one transaction: the
// message id, or ok == false when its key was used before with another
// payload (OB002).
func placeOrder(ctx context.Context, conn *pgx.Conn, orderID int64, customer, total string,
) (id int64, ok bool, err error) {
	payload, err := json.Marshal(struct {
		OrderID  int64  `json:"order_id"`
		Customer string `json:"customer"`
		Total    string `json:"total"`
	}{orderID, customer, total})
	if err != nil {
		return 0, false, err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	defer tx.Rollback(ctx) // after Commit: nothing to do
	if _, err = tx.Exec(ctx,
		"INSERT INTO shop_orders (id, customer, total) VALUES ($1, $2, $3)"+
			" ON CONFLICT (id) DO NOTHING",
		orderID, customer, total); err != nil {
		return 0, false, err
	}
	// A savepoint (pgx: Begin on a transaction): an OB002 undoes the
	// enqueue only, not the order.
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	err = sp.QueryRow(ctx, "SELECT outbox.enqueue($1, $2, $3::jsonb)",
		topic, fmt.Sprintf("order-%d", orderID), string(payload)).Scan(&id)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		ok = true
		err = sp.Commit(ctx) // RELEASE SAVEPOINT
	case errors.As(err, &pgErr) && pgErr.Code == "OB002":
		err = sp.Rollback(ctx) // ROLLBACK TO SAVEPOINT
	}
	if err != nil {
		return 0, false, err
	}
	return id, ok, tx.Commit(ctx)
}

func main() {
	db := flag.String("db", "", "the service's PostgreSQL (conninfo or URL; default: PG* variables)")
	order := flag.Int64("order", 0, "the order's id")
	customer := flag.String("customer", "", "the customer's name")
	total := flag.String("total", "", "an amount, as text: 19.90")
	flag.Parse()
	if *order == 0 || *customer == "" || *total == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "place_order: --order, --customer and --total are required")
		flag.Usage()
		os.Exit(2)
	}
	ctx := context.Background()
	config, err := pgx.ParseConfig(*db)
	if err != nil {
		fmt.Fprintf(os.Stderr, "place_order: %v\n", err)
		os.Exit(2)
	}
	// Describe, not prepare: no named statement on the server, which
	// PgBouncer before 1.21 in transaction mode keeps on its server
	// session for the next client ("prepared statement ... already
	// exists") or loses between transactions.
	config.BuildStatementCache = func(pc *pgconn.PgConn) stmtcache.Cache {
		return stmtcache.New(pc, stmtcache.ModeDescribe, 512)
	}
	conn, err := pgx.ConnectConfig(ctx, config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "place_order: %v\n", err)
		os.Exit(1)
	}
	defer conn.Close(ctx)
	id, ok, err := placeOrder(ctx, conn, *order, *customer, *total)
	if err != nil {
		fmt.Fprintf(os.Stderr, "place_order: %v\n", err)
		conn.Close(ctx)
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintf(os.Stderr, "order %d: already announced with another payload (OB002):"+
			" not announced again\n", *order)
		conn.Close(ctx)
		os.Exit(3)
	}
	fmt.Printf("order %d: message %d\n", *order, id)
}
