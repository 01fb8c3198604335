#!/usr/bin/env node
'use strict';
// node producer.js URL QUEUE JOBS_JSON: BullMQ's own Queue.add of each {name, data, opts} of JOBS_JSON
// (FlowProducer.add when it has children: one parent, its children in the same queue); prints
// {data.name: job id} of every job as JSON.
const { FlowProducer, Queue } = require('bullmq');
const connectionFrom = require('./conn');

(async () => {
  const [url, queueName, jobsJson] = process.argv.slice(2);
  const connection = connectionFrom(url);
  const queue = new Queue(queueName, { connection });
  const flow = new FlowProducer({ connection });
  const ids = {};
  for (const job of JSON.parse(jobsJson)) {
    if (!job.children) {
      ids[job.data.name] = (await queue.add(job.name, job.data, job.opts)).id;
      continue;
    }
    const children = job.children.map((c) => ({ ...c, queueName }));
    const tree = await flow.add({ ...job, queueName, children });
    for (const node of [tree, ...tree.children]) ids[node.job.data.name] = node.job.id;
  }
  await Promise.all([queue.close(), flow.close()]);
  process.stdout.write(JSON.stringify(ids) + '\n');
})().catch((e) => { process.stderr.write(`producer: ${e.stack}\n`); process.exit(1); });
