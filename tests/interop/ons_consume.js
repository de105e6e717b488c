'use strict';
// Consume from an mqstore broker with an ali-ons push consumer (clustering mode).
//
// Usage: node ons_consume.js '<json options>'
//   {nameSrv, group, topic, expression, expect, timeoutMs, fromWhere, settleMs}
// Prints one JSON line per message received ({topic, tags, keys, body, properties,
// msgId (ali-ons: the offset id), uniqKey, queueId, queueOffset, reconsumeTimes,
// bornTimestamp}), then, once `expect` distinct messages arrived (plus `settleMs` to
// catch extras) or `timeoutMs` passed, closes the consumer (which persists its offsets to the broker and unregisters) and
// prints {"done": true|false, "count": n}.

const { Consumer } = require('ali-ons');

const httpclient = { request: async () => { throw new Error('no http: nameSrv is given'); } };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function main(opts) {
  const consumer = new Consumer({
    httpclient,
    nameSrv: opts.nameSrv,
    consumerGroup: opts.group,
    consumeFromWhere: opts.fromWhere || 'CONSUME_FROM_FIRST_OFFSET',
    persistConsumerOffsetInterval: 1000,
    rebalanceInterval: opts.rebalanceMs || 10000,
    brokerSuspendMaxTimeMillis: 2000,
    consumerTimeoutMillisWhenSuspend: 5000,
  });
  consumer.on('error', err => process.stderr.write(`consumer error: ${err && err.stack || err}\n`));
  const seen = new Set();
  consumer.subscribe(opts.topic, opts.expression || '*', async msg => {
    seen.add(msg.msgId);
    process.stdout.write(JSON.stringify({
      topic: msg.topic,
      tags: msg.tags,
      keys: msg.keys,
      body: msg.body.toString('utf8'),
      properties: msg.properties,
      msgId: msg.msgId,
      uniqKey: msg.properties.UNIQ_KEY,
      queueId: msg.queueId,
      queueOffset: String(msg.queueOffset),
      reconsumeTimes: msg.reconsumeTimes,
      bornTimestamp: String(msg.bornTimestamp),
    }) + '\n');
  });
  await consumer.ready();
  process.stderr.write('ready\n');
  const deadline = Date.now() + (opts.timeoutMs || 20000);
  while (seen.size < (opts.expect || 0) && Date.now() < deadline) await sleep(20);
  const done = seen.size >= (opts.expect || 0);
  await sleep(opts.settleMs || 0);
  await consumer.close();
  process.stdout.write(JSON.stringify({ done, count: seen.size }) + '\n');
}

main(JSON.parse(process.argv[2])).then(() => process.exit(0), err => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
