// web_view.mjs - `outboxctl web` in a real browser (Debian's chromium,
// driven by playwright-core), run by tests/integration/test_web_browser.c,
// which prepared the databases and started the server. Checks what a user
// would: the per-topic counts shown after a refresh equal psql's; keys and
// payloads holding markup render as text and run nothing (no dialog,
// window.__pwned unset, no element made from them, no CSP violation, the
// CSP header present); requeue from the page refused without the token
// (#notice says so, the row stays dead in the database) and done with it
// (the row moves), one older than the dedup retention refused with its
// reason; hide-payloads hides them. Screenshots into artifacts.
//
// Usage: node web_view.mjs JSON, with JSON
//   {"url": "http://127.0.0.1:PORT", "token": "...", "db": CONNINFO,
//    "inbox_db": CONNINFO, "artifacts": DIR, "requeue_id": ID,
//    "old_id": ID (a dead letter older than the dedup retention),
//    "hostile": [{"id": ID, "key": K, "payload_has": [TEXT, ...]}],
//    "dead_hostile": [{"id": ID, "key": K}]}
// Prints RESULT {json} and exits 0, or FAILED: why and exits 1.
import { check, nextRefresh, noScriptRan, psqlRows, psqlValue, run, screenshot, text, waitFor }
    from './lib.mjs';

const cfg = JSON.parse(process.argv[2] || '{}');
for (const k of ['url', 'token', 'db', 'artifacts', 'requeue_id', 'old_id', 'hostile', 'dead_hostile'])
	check(cfg[k] !== undefined, `web_view.mjs: ${k} missing from the argument`);

const CSP_DIRECTIVES = ["default-src 'none'", "script-src 'self'", "style-src 'self'",
	"connect-src 'self'", "img-src 'self'", "base-uri 'none'", "frame-ancestors 'none'"];
const TOPIC_FIELDS = { pending: 'pending', inflight: 'in_flight', delivered: 'delivered',
	dead: 'dead' };

function statusOf(id) {
	return psqlValue(cfg.db, `SELECT status FROM outbox.messages WHERE id = ${Number(id)}`);
}

async function topicsShown(page) {
	return page.$$eval('#topics tbody tr[data-topic]', rows => rows.map(tr => {
		const o = { topic: tr.getAttribute('data-topic') };
		for (const td of tr.querySelectorAll('td[data-field]'))
			o[td.getAttribute('data-field')] = td.textContent.trim();
		return o;
	}));
}

// The counts shown equal topic_stats' (the figures of outboxctl status):
// read the page between two identical psql reads, so a change in between
// cannot pass or fail it by chance.
async function checkTopics(page) {
	const sql = 'SELECT topic, pending, in_flight, delivered, dead FROM outbox.topic_stats()' +
	    ' ORDER BY topic';
	return waitFor('the topic counts shown to equal psql\'s', async () => {
		const before = JSON.stringify(psqlRows(cfg.db, sql));
		const shown = await topicsShown(page);
		const rows = psqlRows(cfg.db, sql);
		if (JSON.stringify(rows) !== before)
			return false;
		check(rows.length > 0, 'psql shows no topic: the test prepared nothing');
		const want = rows.map(([topic, pending, in_flight, delivered, dead]) =>
		    ({ topic, pending, in_flight, delivered, dead }));
		const byTopic = Object.fromEntries(shown.map(s => [s.topic, s]));
		check(shown.length === want.length,
		    `the page shows topics ${shown.map(s => s.topic)}, psql ${want.map(w => w.topic)}`);
		for (const w of want) {
			const s = byTopic[w.topic];
			check(s !== undefined, `topic ${w.topic} is not shown`);
			for (const [field, col] of Object.entries(TOPIC_FIELDS))
				check(s[field] === w[col],
				    `topic ${w.topic}: ${field} shown ${s[field]}, psql ${w[col]}`);
			check(/^\d+(\.\d+)?$|^$|^-$/.test(s.oldest_age_s ?? ''),
			    `topic ${w.topic}: oldest_age_s shown "${s.oldest_age_s}"`);
		}
		return want;
	});
}

async function checkHostile(page, seen) {
	for (const h of cfg.hostile) {
		const row = `#messages tbody tr[data-id="${h.id}"]`;
		await waitFor(`message ${h.id} in #messages`, () => text(page, `${row} td[data-field="key"]`));
		const raw = await page.textContent(`${row} td[data-field="key"]`);
		check(raw.trim() === h.key, `message ${h.id}: key shown ${JSON.stringify(raw)}, stored ${JSON.stringify(h.key)}`);
		check(await page.isVisible(`${row} td[data-field="key"]`), `message ${h.id}: its key is not visible`);
		const payload = await text(page, `${row} td[data-field="payload"]`);
		for (const t of h.payload_has)
			check(payload !== null && payload.includes(t),
			    `message ${h.id}: payload shown ${JSON.stringify(payload)} lacks ${JSON.stringify(t)}`);
	}
	for (const h of cfg.dead_hostile) {
		const row = `#dead tbody tr[data-id="${h.id}"]`;
		const t = await waitFor(`dead letter ${h.id} in #dead`, () => text(page, row));
		check(t.includes(h.key), `dead letter ${h.id}: row text ${JSON.stringify(t)} lacks its key ${JSON.stringify(h.key)}`);
	}
	await noScriptRan(page, seen, 'with the hostile rows shown');
}

async function notice(page) {
	return (await text(page, '#notice')) ?? '';
}

// Click requeue on dead letter id; the answer #notice shows (emptied
// first, so that an answer worded as the last one is seen too).
async function clickRequeue(page, id) {
	await page.$eval('#notice', n => { n.textContent = ''; });
	await page.click(`#dead tbody tr[data-id="${id}"] button[data-action="requeue"]`);
	return waitFor('#notice to show the requeue\'s answer', async () => (await notice(page)) || false);
}

// The server's own refusal, whatever the page does: a POST without the
// header and one with a wrong token answer 401.
async function requeueStatus(page, id, auth) {
	return page.evaluate(async ([id, auth]) => {
		const headers = { 'Content-Type': 'application/json' };
		if (auth)
			headers.Authorization = auth;
		const r = await fetch('/api/dead/requeue', { method: 'POST', headers,
		    body: JSON.stringify({ ids: [id] }) });
		return r.status;
	}, [Number(id), auth]);
}

async function checkRequeue(page) {
	const id = cfg.requeue_id;
	check(statusOf(id) === 'dead', `message ${id} is ${statusOf(id)} before the requeue, not dead`);
	await page.fill('#token', '');
	const refused = await clickRequeue(page, id);
	check(/token|401|unauthori[sz]ed/i.test(refused),
	    `requeue without a token: #notice says ${JSON.stringify(refused)}, which names no token`);
	check(statusOf(id) === 'dead', `requeue without a token moved message ${id}: ${statusOf(id)}`);
	const refusedShot = await screenshot(page, cfg.artifacts, 'web-view-requeue-refused');
	await page.fill('#token', 'not-the-token-0000000000');
	const wrong = await clickRequeue(page, id);
	check(/401|token|unauthori[sz]ed/i.test(wrong),
	    `requeue with a wrong token: #notice says ${JSON.stringify(wrong)}`);
	check(statusOf(id) === 'dead', `requeue with a wrong token moved message ${id}: ${statusOf(id)}`);
	for (const auth of [null, 'Bearer not-the-token-0000000000', `Basic ${cfg.token}`]) {
		const st = await requeueStatus(page, id, auth);
		check(st === 401, `POST /api/dead/requeue with Authorization ${auth}: ${st}, want 401`);
	}
	check(statusOf(id) === 'dead', `a refused requeue moved message ${id}: ${statusOf(id)}`);

	await page.fill('#token', cfg.token);
	const old = await clickRequeue(page, cfg.old_id);
	check(/refused/i.test(old) && /retention/.test(old),
	    `requeue of a dead letter older than the retention: #notice says ${JSON.stringify(old)}`);
	check(statusOf(cfg.old_id) === 'dead', `message ${cfg.old_id}, too old, moved: ${statusOf(cfg.old_id)}`);
	const done = await clickRequeue(page, id);
	check(/requeued/i.test(done) && done.includes(String(id)),
	    `requeue with the token: #notice says ${JSON.stringify(done)}`);
	await waitFor(`message ${id} to leave the dead letters in the database`,
	    () => statusOf(id) === 'pending');
	for (const other of [...cfg.dead_hostile.map(h => h.id), cfg.old_id])
		check(statusOf(other) === 'dead', `message ${other} moved too: ${statusOf(other)}`);
	await waitFor(`message ${id} to leave #dead`,
	    async () => (await page.$(`#dead tbody tr[data-id="${id}"]`)) === null);
	return { refused, wrong, old, done, refusedShot };
}

// Payload cells a user can read: visible and showing the payload (every
// payload of the test is a JSON object; a placeholder such as "(hidden)"
// is not one).
async function payloadsReadable(page) {
	const cells = await page.$$('#messages tbody td[data-field="payload"]');
	let n = 0;
	for (const c of cells)
		if (await c.isVisible() && (await c.textContent()).trim().startsWith('{'))
			n++;
	return n;
}

async function checkHidePayloads(page) {
	const before = await payloadsReadable(page);
	check(before > 0, 'no payload readable before hide-payloads');
	await page.check('#hide-payloads');
	await waitFor('the payloads to be hidden', async () => (await payloadsReadable(page)) === 0);
	await nextRefresh(page);
	const after = await payloadsReadable(page);
	check(after === 0, `a refresh brought ${after} payloads back while hidden`);
	for (const h of cfg.hostile) {
		const cell = `#messages tbody tr[data-id="${h.id}"] td[data-field="payload"]`;
		const t = (await text(page, cell)) ?? '';
		check(!(await page.isVisible(cell)) || h.payload_has.every(p => !t.includes(p)),
		    `message ${h.id}: payload ${JSON.stringify(t)} still shown while hidden`);
	}
	return { before, after };
}

async function checkConsumer(page) {
	if (!cfg.inbox_db)
		return null;
	const applied = psqlValue(cfg.inbox_db,
	    "SELECT count(*) FROM inbox.processed WHERE outcome = 'applied'");
	const shown = await waitFor('#consumer applied', () => text(page, '#consumer [data-field="applied"]'));
	check(shown === applied, `#consumer applied shown ${shown}, psql ${applied}`);
	const keys = new Set(psqlRows(cfg.inbox_db, 'SELECT idempotency_key FROM inbox.processed').map(r => r[0]));
	const dedup = await page.$$eval('#dedup tbody tr', rows => rows.map(r => r.textContent));
	check(dedup.length > 0, '#dedup shows no dedup record');
	for (const d of dedup)
		check([...keys].some(k => d.includes(k)), `#dedup row ${JSON.stringify(d)} holds no stored key`);
	return { applied, dedup: dedup.length };
}

run(async ({ page, seen }) => {
	const resp = await page.goto(cfg.url, { waitUntil: 'load' });
	check(resp.status() === 200, `GET / answered ${resp.status()}`);
	const csp = resp.headers()['content-security-policy'] || '';
	for (const d of CSP_DIRECTIVES)
		check(csp.includes(d), `the page's CSP header ${JSON.stringify(csp)} lacks ${d}`);
	check(!csp.includes('unsafe-'), `the page's CSP allows ${csp}`);

	await waitFor('the first snapshot applied', async () => Number(await page.getAttribute('body', 'data-refreshes')) > 0);
	await nextRefresh(page);
	const topics = await checkTopics(page);
	check(await page.isVisible('#chart'), '#chart is not visible');
	await checkHostile(page, seen);
	const consumer = await checkConsumer(page);
	const shot = await screenshot(page, cfg.artifacts, 'web-view');

	const requeue = await checkRequeue(page);
	await screenshot(page, cfg.artifacts, 'web-view-requeued');
	const hidden = await checkHidePayloads(page);
	await screenshot(page, cfg.artifacts, 'web-view-payloads-hidden');
	await noScriptRan(page, seen, 'at the end');
	return { topics, consumer, requeue, hidden, screenshot: shot, csp };
}, cfg.artifacts);
