#!/usr/bin/env node
// failed_ops.js: the BullMQ side of bench/bulk_compare.py.
//
// Against one Redis server and one queue name it
//   1. obliterates the queue, adds N jobs with ~PAYLOAD bytes of data
//      (Queue.addBulk, attempts 1, never removed on failure),
//   2. lets a real BullMQ Worker fail every one of them (a processor that
//      throws; high concurrency), so each is a genuine BullMQ failed job
//      (job hash with failedReason/stacktrace/finishedOn, member of the
//      failed zset, events written) made by BullMQ's own moveToFinished,
//   3. times ONE operation on them and prints one JSON line on stdout:
//        retry: await queue.retryJobs({ state: 'failed', count: COUNT })
//               (BullMQ loops until its cursor is 0: every job back to wait)
//        clean: await queue.clean(0, N, 'failed')  (deletes every failed job)
//      {"op", "n", "seconds", "jobs_per_s", "setup_seconds", "bullmq"}
//   --op floor instead makes no jobs: one retryJobs on the queue, empty, and
//   exits; the caller times the whole process (node, require, connection),
//   BullMQ's fixed cost beside jobctl's.
//
// With --wait-go it prints "ready" once the failed jobs exist and waits for a
// line on stdin before timing, so the caller can start its probes first.
// Progress goes to stderr; stdout carries only "ready" and the JSON line.
//
//   node failed_ops.js --url redis://127.0.0.1:6379/0 --queue bench --n 100000 --op retry
//
// Exit codes: 0 done and verified, 2 bad arguments, 1 anything else.

'use strict';

const { Queue, Worker } = require('bullmq');
const BULLMQ_VERSION = require('bullmq/package.json').version;

function usage(msg) {
  process.stderr.write(`failed_ops.js: ${msg}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const out = { url: 'redis://127.0.0.1:6379/0', queue: 'bench', n: 10000, op: null, payload: 500,
    count: 1000, concurrency: 1000, bulk: 1000, waitGo: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = () => { if (i + 1 >= argv.length) usage(`${a} needs a value`); return argv[++i]; };
    if (a === '--url') out.url = next();
    else if (a === '--queue') out.queue = next();
    else if (a === '--n') out.n = parseInt(next(), 10);
    else if (a === '--op') out.op = next();
    else if (a === '--payload-bytes') out.payload = parseInt(next(), 10);
    else if (a === '--count') out.count = parseInt(next(), 10);
    else if (a === '--concurrency') out.concurrency = parseInt(next(), 10);
    else if (a === '--bulk') out.bulk = parseInt(next(), 10);
    else if (a === '--wait-go') out.waitGo = true;
    else usage(`unknown argument ${a}`);
  }
  if (!['retry', 'clean', 'floor'].includes(out.op)) usage('--op must be retry, clean or floor');
  for (const k of ['n', 'payload', 'count', 'concurrency', 'bulk']) {
    if (!Number.isInteger(out[k]) || out[k] < 1) usage(`--${k} must be a positive integer`);
  }
  return out;
}

function connectionFrom(url) {
  const u = new URL(url);
  if (u.protocol !== 'redis:') usage(`only redis:// URLs are supported, not ${u.protocol}`);
  const conn = { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379), maxRetriesPerRequest: null };
  if (u.password) conn.password = decodeURIComponent(u.password);
  if (u.username) conn.username = decodeURIComponent(u.username);
  const db = u.pathname.replace('/', '');
  if (db) conn.db = Number(db);
  return conn;
}

const now = () => Number(process.hrtime.bigint()) / 1e9;
const log = (msg) => process.stderr.write(`[bullmq] ${msg}\n`);

function waitForLine() {
  return new Promise((resolve) => {
    process.stdin.setEncoding('utf8');
    process.stdin.once('data', () => { process.stdin.pause(); resolve(); });
    process.stdin.once('end', resolve);
  });
}

async function makeFailed(queue, connection, args) {
  // ~payload bytes of job data: a filler string plus a few realistic fields
  const filler = 'x'.repeat(Math.max(0, args.payload - 87));
  const t0 = now();
  for (let start = 0; start < args.n; start += args.bulk) {
    const jobs = [];
    for (let i = start; i < Math.min(args.n, start + args.bulk); i++) {
      jobs.push({ name: 'invoice.email.send',
        data: { i, tenantId: `t${i % 10}`, invoiceId: `invoice_${i}`, recipientUserId: `user_${i % 9973}`, filler },
        opts: { attempts: 1, removeOnComplete: false, removeOnFail: false } });
    }
    await queue.addBulk(jobs);
  }
  const added = now();
  log(`added ${args.n} jobs in ${(added - t0).toFixed(1)} s`);

  let failed = 0;
  let resolveDone;
  const done = new Promise((r) => { resolveDone = r; });
  const worker = new Worker(queue.name, async () => {
    const err = new Error('HTTP_503 upstream unavailable');
    err.stack = 'Error: HTTP_503 upstream unavailable\n    at bench (failed_ops.js)';
    throw err;
  }, { connection, concurrency: args.concurrency, autorun: false, drainDelay: 1 });
  worker.on('failed', () => { failed += 1; if (failed >= args.n) resolveDone(); });
  worker.on('error', (e) => log(`worker error: ${e.message}`));
  worker.run();
  await done;
  await worker.close();
  const counts = await queue.getJobCounts('failed', 'wait', 'active');
  if (counts.failed !== args.n || counts.wait !== 0 || counts.active !== 0) {
    throw new Error(`expected ${args.n} failed jobs, have ${JSON.stringify(counts)}`);
  }
  log(`${args.n} jobs failed by a Worker in ${(now() - added).toFixed(1)} s`);
  return now() - t0;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const connection = connectionFrom(args.url);
  const queue = new Queue(args.queue, { connection });
  try {
    if (args.op === 'floor') {
      const t0 = now();
      await queue.retryJobs({ state: 'failed', count: args.count });
      process.stdout.write(JSON.stringify({ op: args.op, seconds: now() - t0, bullmq: BULLMQ_VERSION }) + '\n');
      return;
    }
    await queue.obliterate({ force: true });
    const setup = await makeFailed(queue, connection, args);
    if (args.waitGo) {
      process.stdout.write('ready\n');
      await waitForLine();
    }
    const t0 = now();
    if (args.op === 'retry') {
      await queue.retryJobs({ state: 'failed', count: args.count });
    } else {
      await queue.clean(0, args.n, 'failed');
    }
    const seconds = now() - t0;
    const counts = await queue.getJobCounts('failed', 'wait');
    const expectWait = args.op === 'retry' ? args.n : 0;
    if (counts.failed !== 0 || counts.wait !== expectWait) {
      throw new Error(`${args.op}: expected 0 failed and ${expectWait} waiting, have ${JSON.stringify(counts)}`);
    }
    process.stdout.write(JSON.stringify({ op: args.op, n: args.n, seconds, jobs_per_s: args.n / seconds,
      setup_seconds: setup, bullmq: BULLMQ_VERSION }) + '\n');
  } finally {
    await queue.close();
  }
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`failed_ops.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
