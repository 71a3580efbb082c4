// demo_page.mjs - the demonstration's page of `outboxctl web --demo` in a
// real browser (Debian's chromium, playwright-core), by the test that
// started the demonstration's stack (test_demo_page_browser): the token
// taken from the address's fragment; the demonstration leading the page
// (above the operator's tables, the picture of the pipeline first); the
// tool endpoints refusing bad input; the picture's figures equal to psql
// (and to the consumer panel); guided step 1's attempts and rows and step
// 4's claim and takeover fences on the picture, against psql; the herd simulator's numbers and
// every bar of its histogram equal to outbox-herd run here with the same
// flags; the idempotency stepper stepped through for three combinations,
// its counts and rows equal to psql; the article's 25 combinations equal
// to psql and to the article; every exercise answered wrong, then right
// with the answer derived from what the programs printed; screenshots
// (demo-page.png: the README's picture). Nothing run from the data.
//
// Usage: node demo_page.mjs JSON, with JSON
//   {"url": URL, "token": "...", "artifacts": DIR, "bin_dir": DIR, "db": CONNINFO,
//    "inbox_db": CONNINFO}
// (db: the producer's database, as the demonstration's programs use it;
// inbox_db: the consumer's).
// Prints RESULT {json} and exits 0, or FAILED: why and exits 1.
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import { check, lit, noScriptRan, psqlRows, psqlValue, run, screenshot, text, waitFor } from './lib.mjs';

const JOB_MS = 300000;    // one tool's run against the real processes
const MATRIX_MS = 900000; // the 25 combinations, each a server of its own
const cfg = JSON.parse(process.argv[2] || '{}');
for (const k of ['url', 'token', 'artifacts', 'bin_dir', 'db', 'inbox_db'])
	check(cfg[k] !== undefined, `demo_page.mjs: ${k} missing from the argument`);

const num = s => (/^-?\d+$/.test(s ?? '') ? Number(s) : NaN);

// POST to the demo's API from the page, as the page does.
async function post(page, path, body, token) {
	return page.evaluate(async ([path, body, token]) => {
		const h = { 'Content-Type': 'application/json' };
		if (token) h.Authorization = 'Bearer ' + token;
		const r = await fetch(path, { method: 'POST', headers: h, body });
		const raw = await r.text();
		let j = {};
		try { j = JSON.parse(raw); } catch (_) { /* none */ }
		return { status: r.status, error: j.error || '', raw };
	}, [path, body, token]);
}

async function demoState(page) {
	return page.evaluate(async () => (await fetch('/api/demo')).json());
}

async function refusals(page) {
	const cases = [
		['/api/demo/tool/herd', '{}', null, 401, 'token'],
		['/api/demo/tool/nosuch', '{}', cfg.token, 404, 'no such tool'],
		['/api/demo/tool/herd', '{"clients":0}', cfg.token, 400, 'clients must be an integer from 1 to 1000'],
		['/api/demo/tool/herd', '{"clients":1001}', cfg.token, 400, 'clients must be'],
		['/api/demo/tool/herd', '{"strategy":"fast"}', cfg.token, 400, 'strategy must be one of none, expo'],
		['/api/demo/tool/herd', '{"runs":5}', cfg.token, 400, "unknown parameter 'runs'"],
		['/api/demo/tool/cell', '{"fault":"meteor"}', cfg.token, 400, 'fault must be one of lost-response'],
		['/api/demo/tool/cell', '{"keys":"random"}', cfg.token, 400, 'keys must be one of none, per_attempt'],
		['/api/demo/tool/cell', '[1]', cfg.token, 400, 'JSON object'],
		['/api/demo/tool/matrix', '{"x":1}', cfg.token, 400, "unknown parameter 'x'"],
		['/api/demo/tool/herd', 'not json', cfg.token, 400, 'JSON object'],
		['/api/demo/tool/cell', '{"<img src=x onerror=alert(1)>":1}', cfg.token, 400,
		    "unknown parameter '<img src=x onerror=alert(1)>'"],
	];
	for (const [path, body, token, want, words] of cases) {
		const r = await post(page, path, body, token);
		check(r.status === want && r.error.includes(words),
		    `POST ${path} ${body}: ${r.status} ${JSON.stringify(r.error)}, want ${want} with ${JSON.stringify(words)}`);
		check(!/[<>&]/.test(r.raw), `POST ${path} ${body}: the answer holds a markup character: ${r.raw}`);
	}
	const get = await page.evaluate(async () => (await fetch('/api/demo/tool/herd')).status);
	check(get === 405, `GET /api/demo/tool/herd: ${get}, want 405`);
	const st = await demoState(page);
	check(Object.values(st.tools).every(t => t.status === 'idle'), `a refused request started a tool: ${JSON.stringify(st.tools)}`);
}

// The demonstration leads: #demo above the operator's tables, on the
// first screen, the picture's six boxes first and in order.
async function leads(page) {
	const r = await page.evaluate(() => {
		const top = sel => document.querySelector(sel).getBoundingClientRect().top + window.scrollY;
		return {
			demo: top('#demo'), operator: top('#operator'), topics: top('#topics'),
			first: document.querySelector('#demo .demo-part').id,
			nodes: [...document.querySelectorAll('#pipeline .pipe-node')].map(n => n.getAttribute('data-node')),
			height: window.innerHeight,
		};
	});
	check(r.demo < r.operator && r.operator < r.topics, `the demonstration does not lead: ${JSON.stringify(r)}`);
	check(r.demo < r.height / 4, `#demo starts at ${r.demo} px, below the top of the first screen`);
	check(r.first === 'pipeline', `the first part is #${r.first}, not the picture`);
	check(r.nodes.join(',') === 'agent,producer,outbox,relay,consumer,downstream', `the picture's boxes: ${r.nodes}`);
}

// The boxes' figures equal psql (the stack is quiet: wait until equal).
async function pipelineFigures(page) {
	const stat = async node => (await text(page, `#pipeline [data-node="${node}"] [data-field="stat"]`)) || '';
	await waitFor('the outbox and producer boxes to show what psql counts', async () => {
		const m = /^pending (\d+), in flight (\d+), delivered (\d+), dead (\d+)$/.exec(await stat('outbox'));
		const w = /^records written (\d+)$/.exec(await stat('producer'));
		if (!m || !w)
			return false;
		const [p, i, d, x, all] = psqlRows(cfg.db, "SELECT count(*) FILTER (WHERE status = 'pending'),"
		    + " count(*) FILTER (WHERE status = 'pending' AND lease_owner IS NOT NULL),"
		    + " count(*) FILTER (WHERE status = 'delivered'), count(*) FILTER (WHERE status = 'dead'),"
		    + ' count(*) FROM outbox.messages')[0];
		return m[1] === p && m[2] === i && m[3] === d && m[4] === x && w[1] === all;
	});
	await waitFor('the downstream box to show the effects psql counts', async () => {
		const m = /^effects applied (\d+)$/.exec(await stat('downstream'));
		return m && m[1] === psqlValue(cfg.inbox_db, "SELECT count(*) FROM inbox.processed WHERE outcome = 'applied'");
	});
	await waitFor("the consumer box to show the consumer panel's counters", async () => {
		const m = /^duplicates answered (\S+), key-reuse rejects (\S+)$/.exec(await stat('consumer'));
		return m && m[1] === (await text(page, '#consumer [data-field="duplicates"]')) &&
		    m[2] === (await text(page, '#consumer [data-field="key_reuse_rejects"]'));
	});
}

// Guided step 4 on the picture: the claims and fences the relays made, as
// the events tell them, against the message's fence in psql.
async function fencesOnPicture(page) {
	const key = await runGuided(page, 4);
	const fence = psqlValue(cfg.db, `SELECT max(fence) FROM outbox.messages WHERE idempotency_key = ${lit(key)}`);
	const relay = await waitFor('the relays\' events of step 4', async () => {
		const st = await demoState(page);
		const told = st.events.filter(e => e.step === 4 && e.node === 'relay').map(e => e.text);
		return told.some(t => t.includes('refused')) ? told : false;
	});
	/* the newest: a run of step 4 before this one may still be listed */
	const claimed = relay.map(t => /^relay A claimed the message \(fence (\d+)\)/.exec(t)).filter(Boolean).pop();
	const took = relay.map(t => /^relay B took the message over with fence (\d+) and delivered it$/.exec(t)).filter(Boolean).pop();
	check(claimed && took, `step 4's relay events: ${JSON.stringify(relay)}`);
	check(took[1] === fence && Number(claimed[1]) < Number(fence),
	    `step 4: claimed with fence ${claimed[1]}, taken over with ${took[1]}; psql says ${fence}`);
	const listed = await page.$$eval('#pipeline-events li[data-node="relay"]', lis => lis.map(li => li.textContent));
	check(listed.some(t => t.includes(`took the message over with fence ${fence}`)), `the event list: ${listed}`);
	// and the relay box: the newest claimed message is this one, with its fence
	const id = psqlValue(cfg.db, `SELECT max(id) FROM outbox.messages WHERE idempotency_key = ${lit(key)}`);
	await waitFor(`the relay box to show message ${id} with fence ${fence}`, async () =>
	    ((await text(page, '#pipeline [data-node="relay"] [data-field="stat"]')) || '')
	        .endsWith(`newest claimed #${id}, fence ${fence}`));
}

// Run guided step n from its button; its key once this run is done (a
// step run before, from this page or another, shows its own key until then).
async function runGuided(page, n) {
	const li = `#demo li[data-step="${n}"]`;
	const before = await text(page, `${li} [data-fact="key"]`);
	await page.click(`${li} button[data-action="run-step"]`);
	return waitFor(`step ${n} done`, async () => {
		const key = await text(page, `${li} [data-fact="key"]`);
		return (await text(page, `${li} [data-field="status"]`)) === 'done' && key && key !== before
		    ? key : false;
	}, JOB_MS);
}

// Guided step 1 on the picture: the agent's attempts with the step's key,
// the report rows psql counts.
async function guidedStepOnPicture(page) {
	const key = await runGuided(page, 1);
	const agent = await waitFor('the agent box to show step 1', async () => {
		const t = await text(page, '#pipeline [data-node="agent"] [data-field="event"]');
		return t && t.includes(key) ? t : false;
	});
	check(/^2 attempt\(s\) with Idempotency-Key \S+, last status 201 \(Idempotent-Replayed\): OK$/.test(agent), `agent box: ${agent}`);
	const outbox = await text(page, '#pipeline [data-node="outbox"] [data-field="event"]');
	const title = `Lost response, step 1 (${key.replace(/^demo-1-/, '')})`;
	const rows = psqlValue(cfg.db, `SELECT count(*) FROM app.bug_reports WHERE title = ${lit(title)}`);
	check(outbox === `${rows} report row(s) titled '${title}'`, `outbox box: ${outbox} (psql: ${rows} titled ${title})`);
	const listed = await page.$$eval('#pipeline-events li', lis => lis.map(li => li.getAttribute('data-node')));
	check(listed.includes('agent') && listed.includes('outbox') && listed.includes('producer'),
	    `the event list names ${listed}`);
}

function herdProgram(strategy, clients, seed) {
	const out = execFileSync(join(cfg.bin_dir, 'outbox-herd'), ['--strategy', strategy, '--clients',
	    String(clients), '--runs', '1', '--seed', String(seed), '--json', '--histogram-bins', '100'],
	    { encoding: 'utf8', timeout: 60000 });
	return JSON.parse(out).strategies[0].cells[0].histogram;
}

async function herd(page, strategy) {
	await page.selectOption('#herd-strategy', strategy);
	await page.fill('#herd-clients', '100');
	await page.fill('#herd-seed', '1');
	await page.click('#herd button[data-action="run-herd"]');
	await waitFor(`the herd simulator's ${strategy} run`, async () =>
	    (await text(page, '#herd [data-field="status"]')) === 'done' &&
	    ((await text(page, '#herd [data-field="command"]')) || '').includes(`--strategy ${strategy} `) &&
	    (await text(page, '#herd [data-field="calls"]')) !== '-' &&
	    (await page.$$('#herd-hist rect')).length === 100, JOB_MS);
	const want = herdProgram(strategy, 100, 1);
	const calls = num(await text(page, '#herd [data-field="calls"]'));
	const ms = num(await text(page, '#herd [data-field="ms"]'));
	const bin = num(await text(page, '#herd [data-field="bin_ms"]'));
	check(calls === want.calls, `${strategy}: ${calls} write requests shown, outbox-herd ${want.calls}`);
	check(ms === Math.round(want.ms), `${strategy}: ${ms} ms shown, outbox-herd ${want.ms}`);
	check(bin === want.bin_ms, `${strategy}: a bar is ${bin} ms, outbox-herd ${want.bin_ms}`);
	const bars = await page.$$eval('#herd-hist rect', rs => rs.map(r => Number(r.getAttribute('data-count'))));
	check(JSON.stringify(bars) === JSON.stringify(want.counts), `${strategy}: bars ${bars}, outbox-herd ${want.counts}`);
	check(bars.reduce((a, b) => a + b, 0) === calls, `${strategy}: the bars do not add up to the requests`);
	return { strategy, calls, ms, bins: bars.filter(b => b > 0).length };
}

// One combination in the stepper, stepped through to the end.
async function cell(page, fault, server, keys) {
	await page.selectOption('#cell-fault', fault);
	await page.selectOption('#cell-server', server);
	await page.selectOption('#cell-keysource', keys);
	await page.click('#cell button[data-action="run-cell"]');
	const tag = `${fault},${server},${keys}`;
	await waitFor(`the stepper's ${tag}`, async () =>
	    ((await text(page, '#cell [data-field="status"]')) || '').startsWith('done') &&
	    ((await text(page, '#cell [data-field="command"]')) || '').includes(`--cell ${tag} `), JOB_MS);
	const st = await demoState(page);
	const events = st.tools.cell.result.events;
	const module = events.find(e => e.event === 'cell').module;
	check(module, `${tag}: no module in the cell's events`);
	// step: one more line each click, the rows of the last attempt shown
	const steps = [];
	for (let i = 1; i <= events.length; i++) {
		const pos = await text(page, '#cell [data-field="position"]');
		check(pos === `${i} / ${events.length}`, `${tag}: position ${pos}, want ${i} / ${events.length}`);
		check((await page.$$('#cell-log li')).length === i, `${tag}: step ${i} shows another number of lines`);
		const e = events[i - 1];
		steps.push(await text(page, '#cell [data-field="current"]'));
		if (e.event === 'attempt') {
			const ids = await page.$$eval('#cell-reports tbody td[data-field="id"]', tds => tds.map(td => td.textContent));
			check(JSON.stringify(ids) === JSON.stringify(e.reports.map(r => String(r.id))),
			    `${tag}: step ${i}: report ids ${ids}, the event's ${e.reports.map(r => r.id)}`);
		}
		if (i < events.length)
			await page.click('#cell button[data-action="step-next"]');
	}
	const reports = await text(page, '#cell [data-field="reports"]');
	const article = await text(page, '#cell [data-field="article"]');
	const rows = psqlRows(cfg.db, `SELECT id FROM app.bug_reports WHERE module = ${lit(module)} ORDER BY id`).map(r => r[0]);
	check(reports === String(rows.length), `${tag}: ${reports} reports shown, psql counts ${rows.length}`);
	const last = events.filter(e => e.event === 'attempt').pop();
	check(JSON.stringify(last.reports.map(r => String(r.id))) === JSON.stringify(rows),
	    `${tag}: the rows after the last attempt ${JSON.stringify(last.reports)}, psql ${rows}`);
	const keyRows = await page.$$eval('#cell-keys tbody tr', trs => trs.map(tr =>
	    [...tr.querySelectorAll('td')].map(td => td.textContent).join('|')));
	const sent = [...new Set(events.filter(e => e.event === 'attempt' && e.key !== null).map(e => e.key))];
	const keysNow = sent.length === 0 ? [] : psqlRows(cfg.db, 'SELECT idempotency_key, state, fence,'
	    + " coalesce(response_status::text, '-') FROM app.idempotency_keys WHERE idempotency_key IN ("
	    + sent.map(lit).join(',') + ') ORDER BY idempotency_key').map(r => r.join('|'));
	check(JSON.stringify(keyRows) === JSON.stringify(keysNow), `${tag}: key rows shown ${JSON.stringify(keyRows)}, psql ${JSON.stringify(keysNow)}`);
	await page.click('#cell button[data-action="step-first"]');
	check((await text(page, '#cell [data-field="position"]')) === `1 / ${events.length}`, `${tag}: |< does not go back`);
	await page.click('#cell button[data-action="step-all"]');
	return { tag, reports: Number(reports), article, steps, events: events.map(e => e.event) };
}

async function matrix(page) {
	await page.click('#matrix button[data-action="run-matrix"]');
	await waitFor('the 25 combinations', async () =>
	    ((await text(page, '#matrix [data-field="status"]')) || '') === 'done' &&
	    (await page.$$eval('#matrix25 td [data-field="got"]', bs => bs.every(b => /^\d+$/.test(b.textContent)))),
	    MATRIX_MS);
	const st = await demoState(page);
	const runId = /--run-id (\S+)/.exec(st.tools.matrix.result.command)[1];
	const shown = await page.$$eval('#matrix25 tbody tr', trs => trs.map(tr => ({
		server: tr.getAttribute('data-server'), keys: tr.getAttribute('data-keys'),
		cells: [...tr.querySelectorAll('td')].map(td => ({ fault: td.getAttribute('data-fault'),
		    got: td.querySelector('[data-field="got"]').textContent, article: td.getAttribute('data-article') })),
	})));
	const got = {};
	shown.forEach((row, r) => row.cells.forEach((c, col) => {
		const n = psqlValue(cfg.db, `SELECT count(*) FROM app.bug_reports WHERE module = ${lit(`matrix-${runId}-r${r + 1}c${col + 1}`)}`);
		check(c.got === n, `cell ${row.server}/${row.keys} x ${c.fault}: ${c.got} shown, psql ${n}`);
		check(c.got === c.article, `cell ${row.server}/${row.keys} x ${c.fault}: ${c.got}, the article ${c.article}`);
		got[`${row.server}/${row.keys}/${c.fault}`] = Number(c.got);
	}));
	const equal = await text(page, '#matrix [data-field="equal"]');
	check(equal === "25 of 25 cells as in the article's table", `the 25: ${equal}`);
	return got;
}

// Each exercise wrong, then right with the answer the programs gave.
async function exercises(page, answers) {
	const ids = await page.$$eval('#exercises li[data-exercise]', lis => lis.map(li => li.getAttribute('data-exercise')));
	check(JSON.stringify(ids.slice().sort()) === JSON.stringify(Object.keys(answers).sort()),
	    `exercises ${ids}, the test answers ${Object.keys(answers)}`);
	for (const id of ids) {
		const li = `#exercises li[data-exercise="${id}"]`;
		const [right, wrong] = answers[id];
		const input = `${li} [data-field="answer"]`;
		const isSelect = await page.$eval(input, e => e.tagName === 'SELECT');
		const give = v => (isSelect ? page.selectOption(input, v) : page.fill(input, v));
		await give(wrong);
		await page.click(`${li} button[data-action="check"]`);
		check((await text(page, `${li} [data-field="grade"]`)) === 'wrong', `${id}: ${wrong} not graded wrong`);
		await give(right);
		await page.click(`${li} button[data-action="check"]`);
		check((await text(page, `${li} [data-field="grade"]`)) === 'right',
		    `${id}: ${right} (what the programs gave) not graded right: ${await text(page, `${li} [data-field="why"]`)}`);
	}
	const score = await text(page, '#exercises [data-field="score"]');
	check(score === `${ids.length} of ${ids.length} right`, `score: ${score}`);
}

run(async ({ page, seen }) => {
	const resp = await page.goto(`${cfg.url}/#token=${cfg.token}`, { waitUntil: 'load' });
	check(resp.status() === 200, `GET / answered ${resp.status()}`);
	await waitFor('#demo (the page asks /api/demo)', async () => (await page.$('#demo #pipeline .pipe-node')) !== null);
	check((await page.inputValue('#token')) === cfg.token, 'the token was not taken from the fragment');
	check(!page.url().includes('token='), `the token is still in the address: ${page.url()}`);
	await leads(page);
	await refusals(page);
	await pipelineFigures(page);
	await guidedStepOnPicture(page);
	await fencesOnPicture(page);

	const herds = {};
	for (const s of ['full', 'equal', 'none', 'expo'])
		herds[s] = await herd(page, s);
	const kept = await page.$$eval('#herd-runs tbody tr', trs => trs.map(tr =>
	    [tr.getAttribute('data-strategy'), ...[...tr.querySelectorAll('td')].slice(1).map(td => td.textContent)]));
	check(JSON.stringify(kept) === JSON.stringify(Object.values(herds).map(h =>
	    [h.strategy, '100', '1', String(h.calls), String(h.ms)])), `the herd runs table: ${JSON.stringify(kept)}`);
	// the article's point, as outbox-herd says it: no jitter clumps
	check(herds.expo.bins < herds.full.bins, `expo's requests fill ${herds.expo.bins} bars, full's ${herds.full.bins}`);
	await page.selectOption('#herd-strategy', 'full');
	await page.click('#herd button[data-action="run-herd"]');
	await waitFor('the full jitter histogram again', async () =>
	    ((await text(page, '#herd [data-field="command"]')) || '').includes('--strategy full ') &&
	    (await text(page, '#herd [data-field="status"]')) === 'done', JOB_MS);

	const cells = [await cell(page, 'lost-response', 'atomic', 'tool_call'),
		await cell(page, 'crash-mid-request', 'split', 'tool_call'),
		await cell(page, 'concurrent-dup', 'none', 'business')];
	check(cells[0].reports === 1 && cells[0].article === '1', `lost-response/atomic/tool_call: ${JSON.stringify(cells[0])}`);
	check(cells[0].steps.some(s => / -> 201 \(replayed from the stored response\)$/.test(s)), `no replayed attempt: ${cells[0].steps}`);
	check(cells[1].article === '2' && cells[1].reports === 2, `crash/split/tool_call: ${JSON.stringify(cells[1])}`);
	check(cells[1].steps.some(s => s.startsWith('the server crashed')) && cells[1].steps.some(s => s.startsWith('the server restarted')),
	    `crash: the server's death and restart are not shown: ${cells[1].steps}`);
	check(cells[2].article === 'not in its table', `concurrent-dup/none/business: ${JSON.stringify(cells[2])}`);

	const shot = await screenshotTop(page);
	const got = await matrix(page);

	const pick = (list, pred) => list.filter(pred);
	const faults = ['lost-response', 'crash-mid-request', 'concurrent-dup', 'new-tool-call-id', 'reworded-title'];
	const keySources = ['none', 'per_attempt', 'tool_call', 'business'];
	const ones = (server, keys) => pick(faults, f => got[`${server}/${keys}/${f}`] === 1);
	const rows = [['none', 'none'], ['atomic', 'per_attempt'], ['split', 'tool_call'], ['atomic', 'tool_call'], ['atomic', 'business']];
	const survivedBy = f => rows.filter(([s, k]) => got[`${s}/${k}/${f}`] === 1).length;
	const newId = pick(keySources, k => got[`atomic/${k}/new-tool-call-id`] === 1);
	const perAttempt = ones('atomic', 'per_attempt');
	const noneSurvive = pick(faults, f => survivedBy(f) === 0);
	const most = ['none', 'equal', 'full'].reduce((a, b) => (herds[a].calls >= herds[b].calls ? a : b));
	check(newId.length === 1 && perAttempt.length === 1 && noneSurvive.length === 1,
	    `the programs' results do not give one answer each: ${JSON.stringify({ newId, perAttempt, noneSurvive })}`);
	await exercises(page, {
		'split-crash': [String(cells[1].reports), String(cells[1].reports + 1)],
		'new-id': [newId[0], 'tool_call'],
		'reworded': [noneSurvive[0], 'lost-response'],
		'per-attempt': [perAttempt[0], 'lost-response'],
		'herd': [most, most === 'full' ? 'none' : 'full'],
	});
	await screenshot(page, cfg.artifacts, 'demo-page-full');
	await noScriptRan(page, seen, 'after the demonstration');
	return { herds, cells: cells.map(c => ({ tag: c.tag, reports: c.reports, article: c.article, events: c.events })), screenshot: shot };
}, cfg.artifacts);

// The README's picture: the top of the page, the demonstration after it ran.
async function screenshotTop(page) {
	await page.setViewportSize({ width: 1280, height: 1600 });
	await page.evaluate(() => window.scrollTo(0, 0));
	const path = join(cfg.artifacts, 'demo-page.png');
	await page.screenshot({ path, clip: { x: 0, y: 0, width: 1280, height: 1600 } });
	await page.setViewportSize({ width: 1280, height: 900 });
	return path;
}
