#!/usr/bin/env node
// receiver.js - a service receiving the outbox's webhook and applying its
// effect exactly once, in its OWN database (node-postgres and Node's own
// http and crypto).
//
//   node receiver.js --secret-file FILE [--db postgresql://...] [--listen HOST:PORT]
//                    [--ready-file FILE]
//
// Point `outbox-consumer --handler webhook --webhook-url http://HOST:PORT/
// --webhook-secret-file FILE` at it. For every POST it verifies
// Outbox-Signature (t=UNIX,v1=HEX,...: HMAC-SHA256 of "t.body" under any
// secret of the file, at most 5 minutes old; 401 otherwise), then, in ONE
// transaction of its database, asks the inbox's SQL contract whether the
// message is new (inbox.dedup_lookup, with the call's Outbox-Fence),
// writes its effect (a row of sent_emails) and the dedup record
// (inbox.dedup_insert), and commits; the answer follows the commit.
// Answers: 200 applied; 200 + Idempotent-Replayed for a duplicate; 409 a
// stale fence; 422 a key used with another payload; 503 + Retry-After
// while another transaction holds the key. Without --db it connects by
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

function args(argv) {
  const a = { listen: '127.0.0.1:8095' };
  for (let i = 2; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) throw new Error(`bad argument ${argv[i]}`);
    a[argv[i].slice(2).replace('-', '_')] = argv[i + 1];
  }
  if (!a.secret_file) throw new Error('--secret-file is required');
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

// 'applied', 'duplicate', 'stale', 'mismatch' or 'busy'.
async function applyOnce(pool, topic, key, body, fence, messageId) {
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
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
        ' message_id => $4, fence => $5, created_at => now(), detail => NULL)',
        [topic, key, body, messageId, fence === null ? 0 : fence]);
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

async function handle(pool, secrets, req, res, body) {
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
  let verdict;
  try {
    verdict = await applyOnce(pool, topic, key, body, fence, messageId || 0);
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
  return answer(res, 503, { error: 'busy' }, { 'Retry-After': '1' });
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
      if (size <= MAX_BODY) handle(pool, secrets, req, res, Buffer.concat(chunks));
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
  process.on('SIGTERM', () => {
    server.close();
    server.closeAllConnections(); // the consumer keeps its connection open
    pool.end().finally(() => process.exit(0));
  });
}

try {
  main();
} catch (e) {
  console.error(`receiver.js: ${e.message}`);
  process.exitCode = 2;
}
