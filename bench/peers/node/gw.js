#!/usr/bin/env node
// bench/peers/node/gw.js - the graphile-worker side of bench/peers/run.sh.
//
//   node gw.js migrate          run graphile-worker's migrations
//   node gw.js work             run a worker pool until SIGTERM/SIGINT
//
// The database comes from libpq's environment (PGHOST = the unix socket
// directory, PGPORT, PGUSER) plus PEERS_DB (the database name): node-pg reads
// the same variables, so no TCP port is ever involved.
//
// The task `bench` does what every system in the benchmark does per message,
// on a client of its own pool (not graphile-worker's): BEGIN; the dedup
// record INSERT ... ON CONFLICT DO NOTHING on the text key; only if that
// inserted a row, the effect row with the payload; COMMIT (the server's
// synchronous_commit = on: a durable commit).
//
// Settings (env, validated by run.sh; re-checked here):
//   PEERS_GW_CONCURRENCY     jobs run at once (run() `concurrency`)
//   PEERS_GW_LOCAL_QUEUE     preset.worker.localQueue.size (-1 = off)
//   PEERS_GW_COMPLETE_DELAY  preset.worker.completeJobBatchDelay and
//                            failJobBatchDelay in ms (-1 = off, 0 = batch the
//                            calls made in the same tick, no waiting)
//   PEERS_GW_T0_FILE         written with the epoch (s) just before run()
'use strict';
const { run, runMigrations, Logger } = require('graphile-worker');
const { Pool } = require('pg');

function intEnv(name, def, min) {
	const raw = process.env[name] ?? String(def);
	if (!/^-?[0-9]+$/.test(raw) || Number(raw) < min) {
		console.error(`gw: ${name} must be an integer >= ${min}, got '${raw}'`);
		process.exit(2);
	}
	return Number(raw);
}

const database = process.env.PEERS_DB;
if (!database) { console.error('gw: PEERS_DB is not set'); process.exit(2); }
const concurrency = intEnv('PEERS_GW_CONCURRENCY', 24, 1);
const localQueueSize = intEnv('PEERS_GW_LOCAL_QUEUE', 500, -1);
const completeDelay = intEnv('PEERS_GW_COMPLETE_DELAY', 0, -1);

// Warnings and errors only: at info level graphile-worker logs a line per
// job, which would time the console rather than the queue.
const logger = new Logger(() => (level, message) => {
	if (level === 'error' || level === 'warning') console.error(`gw: ${level}: ${message}`);
});

// Errors of idle clients (a server going away) are logged, not thrown.
function onErrors(pool) {
	pool.on('error', (e) => console.error(`gw: idle client: ${e}`));
	pool.on('connect', (c) => c.on('error', (e) => console.error(`gw: client: ${e}`)));
}

async function migrate() {
	const pgPool = new Pool({ database, max: 2 });
	onErrors(pgPool);
	await runMigrations({ pgPool, logger });
	await pgPool.end();
}

async function work() {
	// graphile-worker's own pool: fetching, completing, LISTEN. As large as
	// the concurrency, as graphile-worker asks (it warns below that).
	const pgPool = new Pool({ database, max: concurrency });
	// The task's pool: one client per job running at once.
	const appPool = new Pool({ database, max: concurrency });
	for (const p of [pgPool, appPool]) onErrors(p);
	const dedup = 'INSERT INTO dedup (key) VALUES ($1) ON CONFLICT DO NOTHING';
	const effect = 'INSERT INTO effects (key, payload) VALUES ($1, $2)';
	const taskList = {
		async bench(job) {
			const c = await appPool.connect();
			try {
				await c.query('BEGIN');
				const r = await c.query({ name: 'dedup', text: dedup, values: [job.key] });
				if (r.rowCount === 1) {
					await c.query({ name: 'effect', text: effect, values: [job.key, JSON.stringify(job.payload)] });
				}
				await c.query('COMMIT');
			} catch (e) {
				await c.query('ROLLBACK').catch(() => {});
				throw e;
			} finally {
				c.release();
			}
		},
	};
	const fs = require('fs');
	const t0File = process.env.PEERS_GW_T0_FILE;
	const t0 = Date.now() / 1000;
	if (t0File) fs.writeFileSync(t0File, `${t0.toFixed(3)}\n`);
	const runner = await run({
		pgPool,
		logger,
		concurrency,
		noHandleSignals: true,
		crontab: '',
		taskList,
		preset: {
			worker: {
				localQueue: { size: localQueueSize },
				completeJobBatchDelay: completeDelay,
				failJobBatchDelay: completeDelay,
			},
		},
	});
	let stopping = false;
	const stop = async () => {
		if (stopping) return;
		stopping = true;
		const t = Date.now();
		try { await runner.stop(); } catch (e) { console.error(`gw: stop: ${e}`); }
		await appPool.end();
		await pgPool.end();
		const u = process.cpuUsage();
		console.error(`gw: stopped in ${Date.now() - t} ms; node CPU user ${(u.user / 1000).toFixed(0)} ms, system ${(u.system / 1000).toFixed(0)} ms`);
		process.exit(0);
	};
	process.on('SIGTERM', stop);
	process.on('SIGINT', stop);
	await runner.promise;
}

const mode = process.argv[2];
const main = mode === 'migrate' ? migrate : mode === 'work' ? work : null;
if (!main) { console.error('usage: node gw.js migrate|work'); process.exit(2); }
main().catch((e) => { console.error(`gw: ${e.stack || e}`); process.exit(1); });
