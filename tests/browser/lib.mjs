// lib.mjs - what the browser scripts of tests/browser share: Debian's
// chromium launched by playwright-core (headless, by its executable path),
// psql for the expectations, polling with a deadline, checks that fail with
// words, and screenshots into the test's artifact directory.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

import { chromium } from 'playwright-core';

export const CHROMIUM = process.env.OUTBOX_CHROMIUM || '/usr/bin/chromium';
// As root, without the sandbox; nothing fetched from outside (this machine's
// network is closed: without these chromium keeps trying, many at a time).
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	'--disable-background-networking', '--disable-component-update', '--disable-sync'];
export const WAIT_MS = 30000; // every condition polled for: generous on a busy 2-core box
export const POLL_MS = 100;

export class CheckError extends Error {}

export function check(cond, what) {
	if (!cond)
		throw new CheckError(what);
}

// Poll fn (async, returns a truthy value when the condition holds) until it
// does or timeoutMs passes; returns its value, or throws naming what.
export async function waitFor(what, fn, timeoutMs = WAIT_MS) {
	const end = Date.now() + timeoutMs;
	let last;
	for (;;) {
		try {
			last = await fn();
			if (last)
				return last;
		} catch (e) {
			last = e.message;
		}
		if (Date.now() > end)
			throw new CheckError(`timed out after ${timeoutMs} ms waiting for ${what}` +
			    (last ? ` (last: ${last})` : ''));
		await new Promise(r => setTimeout(r, POLL_MS));
	}
}

// One SQL statement through psql on conninfo: its rows as arrays of text
// (unaligned, tab-separated, no headers).
export function psqlRows(conninfo, sql) {
	const out = execFileSync('psql', ['-XAtq', '-v', 'ON_ERROR_STOP=1', '-F', '\t', '-d', conninfo,
	    '-c', sql], { encoding: 'utf8', timeout: WAIT_MS });
	return out.split('\n').filter(l => l !== '').map(l => l.split('\t'));
}

export function psqlValue(conninfo, sql) {
	const rows = psqlRows(conninfo, sql);
	return rows.length ? rows[0][0] : null;
}

// SQL text literal (the expectations hold hostile strings on purpose).
export function lit(s) {
	return `'${String(s).replaceAll("'", "''")}'`;
}

// The browser and one page, with what it did that a test forbids recorded:
// dialogs (dismissed), uncaught page errors, CSP violations.
export async function openBrowser() {
	const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true,
	    args: CHROMIUM_ARGS });
	const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
	await context.addInitScript(() => {
		window.__csp = [];
		document.addEventListener('securitypolicyviolation',
		    e => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
	});
	const page = await context.newPage();
	const seen = { dialogs: [], pageErrors: [] };
	page.on('dialog', d => { seen.dialogs.push(d.message()); d.dismiss().catch(() => {}); });
	page.on('pageerror', e => seen.pageErrors.push(e.message));
	return { browser, page, seen };
}

export async function screenshot(page, dir, name) {
	mkdirSync(dir, { recursive: true });
	const path = join(dir, `${name}.png`);
	await page.screenshot({ path, fullPage: true });
	return path;
}

// The page's refresh counter (body[data-refreshes]), -1 when absent.
export async function refreshes(page) {
	const v = await page.getAttribute('body', 'data-refreshes');
	return v === null ? -1 : Number(v);
}

// Wait until the page has applied a snapshot after now.
export async function nextRefresh(page) {
	const n = await refreshes(page);
	await waitFor(`body[data-refreshes] to grow past ${n}`, async () => (await refreshes(page)) > n);
}

// What ran or was made from the data: must all be empty.
export async function noScriptRan(page, seen, when) {
	const r = await page.evaluate(() => ({
		pwned: typeof window.__pwned,
		csp: window.__csp || [],
		imgs: document.querySelectorAll('#messages img, #dead img, #dedup img, #notice img, #demo img').length,
		scripts: [...document.scripts].filter(s => !s.src).length,
	}));
	check(r.pwned === 'undefined', `${when}: window.__pwned is set: a key or payload ran as script`);
	check(r.imgs === 0, `${when}: ${r.imgs} <img> in the tables: data was parsed as markup`);
	check(r.scripts === 0, `${when}: ${r.scripts} inline <script> in the page`);
	check(r.csp.length === 0, `${when}: CSP violations: ${r.csp.join('; ')}`);
	check(seen.dialogs.length === 0, `${when}: dialogs opened: ${seen.dialogs.join('; ')}`);
	check(seen.pageErrors.length === 0, `${when}: page errors: ${seen.pageErrors.join('; ')}`);
}

export async function text(page, selector) {
	const el = await page.$(selector);
	return el === null ? null : (await el.textContent()).trim();
}

// Run main; on failure print the reason, screenshot the page as
// failure.png when there is one, and exit 1.
export async function run(main, artifacts) {
	let ctx = null;
	try {
		ctx = await openBrowser();
		const result = await main(ctx);
		console.log('RESULT ' + JSON.stringify(result));
		await ctx.browser.close();
		process.exit(0);
	} catch (e) {
		console.error(`FAILED: ${e instanceof CheckError ? e.message : e.stack}`);
		if (ctx) {
			try {
				console.error(`seen: ${JSON.stringify(ctx.seen)}`);
				console.error(`screenshot: ${await screenshot(ctx.page, artifacts, 'failure')}`);
			} catch (_) { /* the page may be gone */ }
			await ctx.browser.close().catch(() => {});
		}
		process.exit(1);
	}
}
