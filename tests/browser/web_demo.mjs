// web_demo.mjs - the guided demonstration of `outboxctl web --demo` clicked
// through in a real browser (Debian's chromium, playwright-core), by the
// test that started the demonstration's stack. For each step given: the
// token entered, its run-step button clicked, its status waited for until
// done, the facts shown compared with what the caller expects and with
// psql, the rows it changed highlighted (tr.hl in #messages), a
// screenshot (demo-step-N.png). Nothing run from the data (as web_view.mjs).
//
// Usage: node web_demo.mjs JSON, with JSON
//   {"url": URL, "token": "...", "artifacts": DIR,
//    "steps": [{"n": N, "facts": {"NAME": value, ...},
//               "facts_from_psql": {"NAME": {"db": CONNINFO, "sql": SQL}},
//               "psql": [{"db": CONNINFO, "sql": SQL, "want": "text"}],
//               "greater": [["A", "B"], ...],
//               "summary_has": ["text", ...], "highlighted": true|false,
//               "highlight_key": true|false,
//               "consumer": {"duplicates": "N", ...}}]}
// facts: the value shown in [data-fact=NAME] (text, compared as strings);
// facts_from_psql: the value shown equals what SQL returns after the step;
// psql: after the step, SQL returns want; greater: fact A shown is a
// number greater than fact B. In SQL, $KEY stands for the key the step
// shows (its fact "key", as an SQL literal). highlighted: more rows of
// #messages are tr.hl after the step than before; highlight_key: the row
// whose key is the fact "key" is one of them. consumer: after the step
// #consumer [data-field=NAME] comes to show N (the consumer's counters,
// read by the view from its /metrics). Prints RESULT {json} (the facts
// shown per step) and exits 0, or FAILED: why and exits 1.
import { check, lit, noScriptRan, psqlValue, run, screenshot, text, waitFor } from './lib.mjs';

const STEP_MS = 180000; // one step against the real processes (a lease must run out in one)

const cfg = JSON.parse(process.argv[2] || '{}');
for (const k of ['url', 'token', 'artifacts', 'steps'])
	check(cfg[k] !== undefined, `web_demo.mjs: ${k} missing from the argument`);

function stepSel(n) {
	return `#demo li[data-step="${n}"]`;
}

async function factsShown(page, n) {
	return page.$$eval(`${stepSel(n)} [data-fact]`, els => Object.fromEntries(
	    els.map(e => [e.getAttribute('data-fact'), e.textContent.trim()])));
}

async function runStep(page, seen, step) {
	const li = stepSel(step.n);
	await waitFor(`step ${step.n} in #demo`, async () => (await page.$(li)) !== null);
	check((await text(page, `${li} [data-field="status"]`)) !== 'running',
	    `step ${step.n} is running before it was clicked`);
	await page.click(`${li} button[data-action="run-step"]`);
	const status = await waitFor(`step ${step.n} to end`, async () => {
		const s = await text(page, `${li} [data-field="status"]`);
		return s === 'done' || s === 'failed' ? s : false;
	}, STEP_MS);
	const summary = (await text(page, `${li} [data-field="summary"]`)) ?? '';
	const notice = (await text(page, '#notice')) ?? '';
	check(status === 'done', `step ${step.n} ${status}: ${summary} (#notice: ${notice})`);
	for (const t of step.summary_has || [])
		check(summary.includes(t), `step ${step.n}: summary ${JSON.stringify(summary)} lacks ${JSON.stringify(t)}`);

	// the facts, once the page shows the step's result
	const shown = await waitFor(`step ${step.n}'s facts`, async () => {
		const f = await factsShown(page, step.n);
		return Object.keys(step.facts || {}).every(k => k in f) ? f : false;
	});
	for (const [k, v] of Object.entries(step.facts || {}))
		check(shown[k] === String(v), `step ${step.n}: fact ${k} shown ${JSON.stringify(shown[k])}, want ${JSON.stringify(String(v))}`);
	const sql = q => (shown.key === undefined ? q : q.replaceAll('$KEY', lit(shown.key)));
	for (const [a, b] of step.greater || []) {
		check(/^-?\d+$/.test(shown[a] ?? '') && /^-?\d+$/.test(shown[b] ?? ''),
		    `step ${step.n}: facts ${a}=${shown[a]} and ${b}=${shown[b]} are not numbers`);
		check(Number(shown[a]) > Number(shown[b]), `step ${step.n}: ${a} ${shown[a]} is not above ${b} ${shown[b]}`);
	}
	for (const [k, q] of Object.entries(step.facts_from_psql || {})) {
		const want = psqlValue(q.db, sql(q.sql));
		check(shown[k] === want, `step ${step.n}: fact ${k} shown ${JSON.stringify(shown[k])}, psql ${JSON.stringify(want)} (${sql(q.sql)})`);
	}
	for (const q of step.psql || []) {
		const got = psqlValue(q.db, sql(q.sql));
		check(got === String(q.want), `step ${step.n}: psql ${sql(q.sql)} gives ${JSON.stringify(got)}, want ${JSON.stringify(String(q.want))}`);
	}
	// its rows highlighted, and only its rows (not those of the steps
	// before: /api/demo names them), and the row of its key when it names
	// the message (highlight_key)
	if (step.highlighted)
		await waitFor(`step ${step.n}'s rows, and only those, highlighted in #messages`,
		    () => page.evaluate(async (n) => {
			const st = await (await fetch('/api/demo')).json();
			const h = (st.steps.find(s => s.n === n).result || {}).highlight || {};
			const keys = new Set(h.keys || []), ids = new Set((h.ids || []).map(String));
			const rows = [...document.querySelectorAll('#messages tbody tr.hl')];
			return rows.length > 0 && rows.every(tr => ids.has(tr.getAttribute('data-id')) ||
			    keys.has(tr.querySelector('td[data-field="key"]').textContent));
		    }, step.n));
	if (step.highlight_key)
		await waitFor(`the row of key ${shown.key} highlighted in #messages`, () =>
		    page.$$eval('#messages tbody tr.hl td[data-field="key"]',
		        (tds, key) => tds.some(td => td.textContent === key), shown.key));
	for (const [k, v] of Object.entries(step.consumer || {}))
		await waitFor(`#consumer ${k} to show ${v} after step ${step.n}`,
		    async () => (await text(page, `#consumer [data-field="${k}"]`)) === String(v));
	const shot = await screenshot(page, cfg.artifacts, `demo-step-${step.n}`);
	await noScriptRan(page, seen, `after step ${step.n}`);
	return { n: step.n, summary, facts: shown, screenshot: shot };
}

run(async ({ page, seen }) => {
	const resp = await page.goto(cfg.url, { waitUntil: 'load' });
	check(resp.status() === 200, `GET / answered ${resp.status()}`);
	await waitFor('#demo (the page asks /api/demo)', async () => (await page.$('#demo')) !== null);
	await page.fill('#token', cfg.token);
	const steps = [];
	for (const step of cfg.steps)
		steps.push(await runStep(page, seen, step));
	return { steps };
}, cfg.artifacts);
