#!/usr/bin/env node
// receiver.js - a service receiving the outbox's webhook and applying its
// effect exactly once, in its OWN database (node-postgres and Node's own
// http and crypto).
//
//   node receiver.js --secret-file FILE [--db postgresql://...] [--listen HOST:PORT]
//                    [--ready-file FILE] [--retention-ms MS] [--purge-interval-ms MS]
//
// Point `outbox-consumer --handler webhook --webhook-url http://HOST:PORT/
// --webhook-secret-file FILE` at it. For every POST it verifies
// Outbox-Signature (t=UNIX,v1=HEX,...: HMAC-SHA256 of "t.body" under any
// secret of the file, at most 5 minutes old; 401 otherwise), then, in ONE
// transaction of its database, refuses a message older than the retention
// (Outbox-Created-At, by the database's clock: its key's record may have
// been purged), asks the inbox's SQL contract whether the message is new
// (inbox.dedup_lookup, with the call's Outbox-Fence), writes its effect (a
// row of sent_emails) and the dedup record (inbox.dedup_insert, with the
// message's created_at), and commits; the answer follows the commit. A
// timer deletes the records past the retention (inbox.purge) every
// --purge-interval-ms: who frees the records.
// Answers: 200 applied; 200 + Idempotent-Replayed for a duplicate; 409 a
// stale fence; 422 a key used with another payload, or a message older
// than the retention; 503 + Retry-After while another transaction holds
// the key. Without --db it connects by
// libpq's environment (PGHOST, ...). The database needs
// `outboxctl migrate --schema inbox` and examples/mailer.sql.
'use strict';
const crypto = require('crypto');
const fs = require('fs');
const http = require('http');
const { Pool } = require('pg');

const MAX_BODY = 1 << 20;          // bytes of a request body
const SIGNATURE_TOLERANCE_S = 300; // how old a signature's t may be
const ATTEMPTS = 2;                // a record committed by another request first: ask again
const RETENTION_MIN_MS = 60000;    // inbox.purge refuses less
const RETENTION_MARGIN_MS = 3600000; // purge: the message older than retention + this
const PURGE_BATCH = 1000;          // records per inbox.purge call

function args(argv) {
  const a = { listen: '127.0.0.1:8095', retention_ms: String(7 * 86400000), purge_interval_ms: '60000' };
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    a[argv[i].slice(2).replace(/-/g, '_')] = argv[i + 1];
  }
  if (!a.secret_file) throw new Error('--secret-file is required');
  a.retention_ms = Number(a.retention_ms);
  a.purge_interval_ms = Number(a.purge_interval_ms);
  if (!Number.isInteger(a.retention_ms) || a.retention_ms < RETENTION_MIN_MS ||
      !Number.isInteger(a.purge_interval_ms) || a.purge_interval_ms < 100) {
    throw new Error('--retention-ms is at least 60000, --purge-interval-ms at least 100');
  }
  return a;
}

// Outbox-Signature: t=UNIX,v1=HEX[,v1=HEX...] over `${t}.${body}`.
function signatureOk(header, body, secrets, now) {
  if (!header) return false;
  let t = null;
  const sigs = [];
  for (const part of header.split(',')) {
    const [k, v] = part.trim().split('=', 2);
    if (k === 't') t = v;
    else if (k === 'v1' && v) sigs.push(Buffer.from(v, 'hex'));
  }
  if (t === null || !/^[0-9]+$/.test(t) || Math.abs(now - Number(t)) > SIGNATURE_TOLERANCE_S) return false;
  const signed = Buffer.concat([Buffer.from(`${t}.`), body]);
  for (const secret of secrets) {
    const want = crypto.createHmac('sha256', secret).update(signed).digest();
    if (sigs.some((s) => s.length === want.length && crypto.timingSafeEqual(s, want))) return true;
  }
  return false;
}

// 'applied', 'duplicate', 'stale', 'mismatch', 'too_old' or 'busy'.
async function applyOnce(pool, topic, key, body, fence, messageId, createdAt, retentionMs) {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      // a message older than the retention may be a redelivery of a key
      // whose record was purged: never applied
      const old = await c.query(
        "SELECT $1::timestamptz < clock_timestamp() - $2 * interval '1 millisecond' AS too_old",
        [createdAt, retentionMs]);
      if (old.rows[0].too_old) {
        await c.query('ROLLBACK');
        return 'too_old';
      }
      await c.query("SELECT inbox.take_source_gate(source => '')");
      const r = await c.query(
        "SELECT verdict FROM inbox.dedup_lookup(source => '', topic => $1, idempotency_key => $2," +
        ' payload => $3, fence => $4)', [topic, key, body, fence]);
      const verdict = r.rows[0].verdict;
      if (verdict !== 'new') {
        await c.query('ROLLBACK');
        return verdict;
      }
      // the effect: a row of this service's own table (the email to send),
      // committed with the record or not at all
      await c.query("INSERT INTO sent_emails (idempotency_key, payload) VALUES ($1, convert_from($2, 'UTF8')::jsonb)",
        [key, body]);
      await c.query(
        "SELECT inbox.dedup_insert(source => '', topic => $1, idempotency_key => $2, payload => $3," +
        ' message_id => $4, fence => $5, created_at => $6, detail => NULL)',
        [topic, key, body, messageId, fence === null ? 0 : fence, createdAt]);
      await c.query('COMMIT');
      return 'applied';
    } catch (e) {
      await c.query('ROLLBACK').catch(() => {});
      if (e.code === '23505') continue; // another request committed this key first: ask again
      if (e.code === '55P03') return 'busy';
      throw e;
    } finally {
      c.release();
    }
  }
  return 'busy';
}

function answer(res, status, doc, headers = {}) {
  const data = Buffer.from(JSON.stringify(doc));
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': data.length, ...headers });
  res.end(data);
}

function number(v) {
  if (v === undefined) return null;
  return /^[0-9]+$/.test(v) ? Number(v) : NaN;
}

// RFC 3339 with a zone, as the consumer sends it
const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

async function handle(pool, a, secrets, req, res, body) {
  if (req.method !== 'POST') return answer(res, 405, { error: 'POST only' });
  if (!signatureOk(req.headers['outbox-signature'], body, secrets, Math.floor(Date.now() / 1000))) {
    return answer(res, 401, { error: 'bad or missing Outbox-Signature' });
  }
  const key = req.headers['idempotency-key'];
  const topic = req.headers['outbox-topic'];
  const fence = number(req.headers['outbox-fence']);
  const messageId = number(req.headers['outbox-message-id']);
  if (Number.isNaN(fence) || Number.isNaN(messageId)) {
    return answer(res, 400, { error: 'Outbox-Fence and Outbox-Message-Id are numbers' });
  }
  if (!key || !topic) return answer(res, 400, { error: 'Idempotency-Key and Outbox-Topic are required' });
  // the message's enqueue time; a consumer before it sent none: then the
  // time of receipt
  const createdAt = req.headers['outbox-created-at'] || new Date().toISOString();
  if (!RFC3339.test(createdAt) || Number.isNaN(Date.parse(createdAt))) {
    return answer(res, 400, { error: 'Outbox-Created-At is not an RFC 3339 time' });
  }
  let verdict;
  try {
    verdict = await applyOnce(pool, topic, key, body, fence, messageId || 0, createdAt, a.retention_ms);
  } catch (e) {
    if (e.code && e.code.startsWith('22')) return answer(res, 400, { error: 'the body is not UTF-8 JSON' });
    console.error(`receiver.js: database: ${e.message}`);
    return answer(res, 503, { error: 'database unavailable' }, { 'Retry-After': '1' });
  }
  console.error(`receiver.js: POST ${key} ${verdict}`);
  if (verdict === 'applied') return answer(res, 200, { key, replayed: false });
  if (verdict === 'duplicate') return answer(res, 200, { key, replayed: true }, { 'Idempotent-Replayed': 'true' });
  if (verdict === 'stale') return answer(res, 409, { error: 'stale_fence', key });
  if (verdict === 'mismatch') return answer(res, 422, { error: 'key used with another payload', key });
  if (verdict === 'too_old') return answer(res, 422, { error: 'older than the retention', key });
  return answer(res, 503, { error: 'busy' }, { 'Retry-After': '1' });
}

// Delete the records past the retention, in short transactions; a failure
// is logged and tried again at the next turn.
async function purge(pool, retentionMs) {
  try {
    for (let n = PURGE_BATCH; n === PURGE_BATCH;) {
      const r = await pool.query('SELECT inbox.purge($1, $2, $3) AS n',
        [retentionMs, RETENTION_MARGIN_MS, PURGE_BATCH]);
      n = Number(r.rows[0].n);
      if (n > 0) console.error(`receiver.js: purged ${n} records`);
    }
  } catch (e) {
    console.error(`receiver.js: purge: ${e.message}`);
  }
}

function main() {
  const a = args(process.argv);
  const secrets = fs.readFileSync(a.secret_file, 'utf8').split('\n').map((s) => s.trim()).filter(Boolean);
  if (secrets.length === 0) throw new Error(`${a.secret_file} holds no secret`);
  const pool = new Pool(a.db ? { connectionString: a.db } : {});
  const server = http.createServer((req, res) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > MAX_BODY) {
        answer(res, 413, { error: 'body too large' });
        req.destroy();
      } else {
        chunks.push(c);
      }
    });
    req.on('end', () => {
      if (size <= MAX_BODY) handle(pool, a, secrets, req, res, Buffer.concat(chunks));
    });
  });
  const i = a.listen.lastIndexOf(':');
  const host = a.listen.slice(0, i);
  server.listen(Number(a.listen.slice(i + 1)), host, () => {
    const url = `http://${host}:${server.address().port}/`;
    if (a.ready_file) { // written whole, then renamed: a reader never sees half
      fs.writeFileSync(`${a.ready_file}.tmp`, `${url}\n`);
      fs.renameSync(`${a.ready_file}.tmp`, a.ready_file);
    }
    console.error(`receiver.js: listening on ${url}`);
  });
  let purging = Promise.resolve();
  const timer = setInterval(() => { purging = purging.then(() => purge(pool, a.retention_ms)); },
    a.purge_interval_ms);
  purging = purge(pool, a.retention_ms);
  process.on('SIGTERM', () => {
    clearInterval(timer);
    server.close();
    server.closeAllConnections(); // the consumer keeps its connection open
    purging.then(() => pool.end()).finally(() => process.exit(0));
  });
}

try {
  main();
} catch (e) {
  console.error(`receiver.js: ${e.message}`);
  process.exitCode = 2;
}
