#!/usr/bin/env node
'use strict';
// node producer.js URL QUEUE JOBS_JSON: BullMQ's own Queue.add of each {name, data, opts} of JOBS_JSON;
// prints the job ids (a JSON list, in order).
const { Queue } = require('bullmq');
const connectionFrom = require('./conn');

(async () => {
  const [url, name, jobsJson] = process.argv.slice(2);
  const queue = new Queue(name, { connection: connectionFrom(url) });
  const ids = [];
  for (const job of JSON.parse(jobsJson)) ids.push((await queue.add(job.name, job.data, job.opts)).id);
  await queue.close();
  process.stdout.write(JSON.stringify(ids) + '\n');
})().catch((e) => { process.stderr.write(`producer: ${e.stack}\n`); process.exit(1); });
