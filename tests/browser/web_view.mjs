// web_view.mjs - `outboxctl web` in a real browser (Debian's chromium,
// driven by playwright-core), run by tests/integration/test_web_browser.c,
// which prepared the databases and started the server. Checks what a user
// would: the per-topic counts shown after a refresh equal psql's; keys and
// payloads holding markup render as text and run nothing (no dialog,
// window.__pwned unset, no element made from them, no CSP violation, the
// CSP header present); requeue from the page refused without the token
// (#notice says so, the row stays dead in the database) and done with it
// (the row moves); hide-payloads hides them. Screenshots into artifacts.
//
// Usage: node web_view.mjs JSON, with JSON
//   {"url": "http://127.0.0.1:PORT", "token": "...", "db": CONNINFO,
//    "inbox_db": CONNINFO, "artifacts": DIR, "requeue_id": ID,
//    "hostile": [{"id": ID, "key": K, "payload_has": [TEXT, ...]}],
//    "dead_hostile": [{"id": ID, "key": K}]}
// Prints RESULT {json} and exits 0, or FAILED: why and exits 1.
import { check, nextRefresh, noScriptRan, psqlRows, psqlValue, run, screenshot, text, waitFor }
    from './lib.mjs';

const cfg = JSON.parse(process.argv[2] || '{}');
for (const k of ['url', 'token', 'db', 'artifacts', 'requeue_id', 'hostile', 'dead_hostile'])
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

async function clickRequeue(page, id) {
	const before = await notice(page);
	await page.click(`#dead tbody tr[data-id="${id}"] button[data-action="requeue"]`);
	// the answer shown: a new text (or the same text shown again: cleared first by the page)
	return waitFor('#notice to show the requeue\'s answer', async () => {
		const n = await notice(page);
		return n !== '' && n !== before ? n : false;
	});
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

	await page.fill('#token', cfg.token);
	const done = await clickRequeue(page, id);
	check(/requeued/i.test(done) && done.includes(String(id)),
	    `requeue with the token: #notice says ${JSON.stringify(done)}`);
	await waitFor(`message ${id} to leave the dead letters in the database`,
	    () => statusOf(id) === 'pending');
	for (const h of cfg.dead_hostile)
		check(statusOf(h.id) === 'dead', `message ${h.id} moved too: ${statusOf(h.id)}`);
	await waitFor(`message ${id} to leave #dead`,
	    async () => (await page.$(`#dead tbody tr[data-id="${id}"]`)) === null);
	return { refused, done, refusedShot };
}

// Payload cells a user can read: visible and not empty.
async function payloadsReadable(page) {
	const cells = await page.$$('#messages tbody td[data-field="payload"]');
	let n = 0;
	for (const c of cells)
		if (await c.isVisible() && (await c.textContent()).trim() !== '')
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
