#!/usr/bin/env node
// place_order.js - a service writing its business row and its outbox
// message in ONE transaction (node-postgres, `pg` from npm, pinned by
// package-lock.json).
//
//   node place_order.js [--db postgresql://...] --order ID --customer NAME --total AMOUNT
//
// Without --db, node-postgres connects by libpq's environment (PGHOST,
// PGPORT, PGDATABASE, PGUSER, PGPASSWORD).
// Prints the message id. The order row and the message commit together or
// not at all; a relay delivers the message after COMMIT. The same again:
// the same id, nothing new. The same order with another total: the key was
// already announced with another payload, SQLSTATE OB002; the savepoint
// around the enqueue keeps the rest of the transaction, and the script
// says so and exits 3.
'use strict';
const { Client } = require('pg');

const TOPIC = 'order.placed';

function args(argv) {
  const a = {};
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    a[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['order', 'customer', 'total']) if (!a[k]) throw new Error(`--${k} is required`);
  return a;
}

// The order and its message in one transaction: the message id, or null
// when its key was used before with another payload (OB002).
async function placeOrder(client, orderId, customer, total) {
  const payload = { order_id: Number(orderId), customer, total };
  await client.query('BEGIN');
  try {
    await client.query(
      'INSERT INTO shop_orders (id, customer, total) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING',
      [orderId, customer, total]);
    let id = null;
    // A savepoint: an OB002 undoes the enqueue only, not the order.
    await client.query('SAVEPOINT enqueue');
    try {
      const r = await client.query('SELECT outbox.enqueue($1, $2, $3::jsonb) AS id',
        [TOPIC, `order-${orderId}`, JSON.stringify(payload)]);
      id = r.rows[0].id;
    } catch (e) {
      if (e.code !== 'OB002') throw e;
      await client.query('ROLLBACK TO SAVEPOINT enqueue');
    }
    await client.query('COMMIT');
    return id;
  } catch (e) {
    await client.query('ROLLBACK');
    throw e;
  }
}

async function main() {
  const a = args(process.argv);
  const client = new Client(a.db ? { connectionString: a.db } : {});
  await client.connect();
  try {
    const id = await placeOrder(client, a.order, a.customer, a.total);
    if (id === null) {
      console.error(`order ${a.order}: already announced with another payload (OB002): not announced again`);
      return 3;
    }
    console.log(`order ${a.order}: message ${id}`);
    return 0;
  } finally {
    await client.end();
  }
}

main().then((code) => { process.exitCode = code; }, (e) => { console.error(`place_order.js: ${e.message}`); process.exitCode = 1; });
