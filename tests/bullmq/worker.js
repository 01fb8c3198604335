#!/usr/bin/env node
'use strict';
// node worker.js URL QUEUE FLAG [UNTIL] [retry]: BullMQ's own Worker (with "retry", BullMQ's own
// Queue.retryJobs of every failed job first).  Its processor throws while the key FLAG
// exists, else INCRs bulltest:count:<job id>.  Prints "ready" once connected; stops when the queue is
// drained (or, with UNTIL, after UNTIL completed jobs), then prints Queue.getJobCounts() as JSON.
const { Queue, Worker } = require('bullmq');
const IORedis = require('ioredis');
const connectionFrom = require('./conn');

(async () => {
  const [url, name, flag, until, retry] = process.argv.slice(2);
  const connection = connectionFrom(url);
  const queue = new Queue(name, { connection });
  if (retry === 'retry') await queue.retryJobs({ state: 'failed' });
  const redis = new IORedis(connection);
  let completed = 0;
  let finish;
  const done = new Promise((resolve) => { finish = resolve; });
  const worker = new Worker(name, async (job) => {
    if (await redis.exists(flag)) throw new Error(`flag set for ${job.data.name}`);
    await redis.incr(`bulltest:count:${job.id}`);
  }, { connection, concurrency: 1 });
  worker.on('completed', () => { completed += 1; if (Number(until) && completed >= Number(until)) finish(); });
  if (!Number(until)) worker.on('drained', finish);
  await worker.waitUntilReady();
  process.stdout.write('ready\n');
  await done;
  await worker.close();
  process.stdout.write(JSON.stringify(await queue.getJobCounts()) + '\n');
  await Promise.all([queue.close(), redis.quit()]);
})().catch((e) => { process.stderr.write(`worker: ${e.stack}\n`); process.exit(1); });
