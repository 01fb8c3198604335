#!/usr/bin/env node
// layout_ops.js: the BullMQ side of bench/bullmq_layout.py (BullMQ's own API only).
//
//   node layout_ops.js seed URL QUEUE N
//     adds N jobs (Queue.addBulk; names alternate "invoice.email.send" /
//     "report.build", every 10th with priority 5, every 20th lifo, a 64-bit
//     integer in data) and lets a real Worker fail each; prints
//     {"seconds", "bullmq"} once getJobCounts says N failed.
//   node layout_ops.js retry URL QUEUE COUNT
//     times await queue.retryJobs({ state: 'failed', count: COUNT }) on the
//     failed jobs already there; prints {"seconds", "counts", "bullmq"}.
//   node layout_ops.js counts URL QUEUE
//     prints Queue.getJobCounts() as JSON.
//
// Exit codes: 0 done, 2 bad arguments, 1 anything else.

'use strict';

const { Queue, Worker } = require('bullmq');
const BULLMQ_VERSION = require('bullmq/package.json').version;

const now = () => Number(process.hrtime.bigint()) / 1e9;

function connectionFrom(url) {
  const u = new URL(url);
  const conn = { host: u.hostname || '127.0.0.1', port: Number(u.port || 6379), maxRetriesPerRequest: null };
  if (u.pathname.length > 1) conn.db = Number(u.pathname.slice(1));
  return conn;
}

async function seed(queue, connection, n) {
  const t0 = now();
  for (let start = 0; start < n; start += 1000) {
    const jobs = [];
    for (let i = start; i < Math.min(n, start + 1000); i++) {
      const opts = { attempts: 1, removeOnComplete: false, removeOnFail: false };
      if (i % 10 === 9) opts.priority = 5;
      else if (i % 20 === 4) opts.lifo = true;
      jobs.push({ name: i % 2 ? 'report.build' : 'invoice.email.send',
        data: { i, big: '9223372036854775807', tenantId: `t${i % 10}`, filler: 'x'.repeat(300) }, opts });
    }
    await queue.addBulk(jobs);
  }
  let failed = 0;
  let finish;
  const done = new Promise((r) => { finish = r; });
  const worker = new Worker(queue.name, async () => { throw new Error('HTTP_503 upstream unavailable'); },
    { connection, concurrency: 500, autorun: false, drainDelay: 1 });
  worker.on('failed', () => { failed += 1; if (failed >= n) finish(); });
  worker.run();
  await done;
  await worker.close();
  const counts = await queue.getJobCounts('failed');
  if (counts.failed !== n) throw new Error(`expected ${n} failed jobs, have ${JSON.stringify(counts)}`);
  return { seconds: now() - t0, bullmq: BULLMQ_VERSION };
}

async function main() {
  const [op, url, name, arg] = process.argv.slice(2);
  if (!['seed', 'retry', 'counts'].includes(op) || !url || !name) {
    process.stderr.write('usage: layout_ops.js seed|retry|counts URL QUEUE [N|COUNT]\n');
    process.exit(2);
  }
  const connection = connectionFrom(url);
  const queue = new Queue(name, { connection });
  try {
    let out;
    if (op === 'seed') out = await seed(queue, connection, parseInt(arg, 10));
    else if (op === 'counts') out = await queue.getJobCounts();
    else {
      await queue.waitUntilReady();
      const t0 = now();
      await queue.retryJobs({ state: 'failed', count: parseInt(arg, 10) });
      out = { seconds: now() - t0, counts: await queue.getJobCounts(), bullmq: BULLMQ_VERSION };
    }
    process.stdout.write(JSON.stringify(out) + '\n');
  } finally {
    await queue.close();
  }
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`layout_ops.js: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
