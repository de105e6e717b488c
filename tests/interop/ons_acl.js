'use strict';
// Produce then consume with ali-ons against an ACL broker, signing with the given keys.
//
// Usage: node ons_acl.js '<json options>'
//   {nameSrv, topic, group, accessKey, secretKey, count, timeoutMs}
// Prints {"sent": msgId} per send, {"received": body} per message consumed, then
// {"done": true|false, "count": n}. On an error prints it to stderr and exits 1.
// Without accessKey the client signs nothing (ali-ons signs only when given both keys).

const { Producer, Consumer, Message } = require('ali-ons');

const httpclient = { request: async () => { throw new Error('no http: nameSrv is given'); } };
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function main(opts) {
  const creds = opts.accessKey ? { accessKey: opts.accessKey, secretKey: opts.secretKey } : {};
  const producer = new Producer({
    httpclient, nameSrv: opts.nameSrv, producerGroup: `${opts.group}-p`,
    instanceName: `acl-produce-${process.pid}`, ...creds,
  });
  await producer.ready();
  for (let i = 0; i < opts.count; i++) {
    const r = await producer.send(new Message(opts.topic, 'T', Buffer.from(`m${i}`, 'utf8')));
    if (r.sendStatus !== 'SEND_OK') throw new Error(`send status ${r.sendStatus}`);
    process.stdout.write(JSON.stringify({ sent: r.msgId }) + '\n');
  }
  await producer.close();
  const consumer = new Consumer({
    httpclient, nameSrv: opts.nameSrv, consumerGroup: opts.group,
    instanceName: `acl-consume-${process.pid}`,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', persistConsumerOffsetInterval: 1000,
    brokerSuspendMaxTimeMillis: 1000, consumerTimeoutMillisWhenSuspend: 3000, ...creds,
  });
  const errors = [];
  consumer.on('error', err => errors.push(String(err && err.message || err)));
  const seen = new Set();
  consumer.subscribe(opts.topic, '*', async msg => {
    const body = msg.body.toString('utf8');
    if (!seen.has(body)) process.stdout.write(JSON.stringify({ received: body }) + '\n');
    seen.add(body);
  });
  await consumer.ready();
  const deadline = Date.now() + (opts.timeoutMs || 20000);
  while (seen.size < opts.count && Date.now() < deadline) await sleep(20);
  await consumer.close();
  for (const e of errors) process.stderr.write(`consumer error: ${e}\n`);
  process.stdout.write(JSON.stringify({ done: seen.size >= opts.count, count: seen.size }) + '\n');
}

main(JSON.parse(process.argv[2])).then(() => process.exit(0), err => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
