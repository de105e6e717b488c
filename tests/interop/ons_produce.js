'use strict';
// Produce messages to an mqstore broker with ali-ons (a third-party RocketMQ client).
//
// Usage: node ons_produce.js '<json options>'
//   {nameSrv, group, topic, messages: [{tags, keys: [..], body, props: {k: v}}]}
// Prints one JSON line per send result ({msgId, queueId, queueOffset, sendStatus})
// and exits 0; on an error prints it to stderr and exits 1. ali-ons sets no UNIQ_KEY,
// so its msgId is the broker's offset message id.
//
// ali-ons finds the broker through the name server (GET_ROUTEINFO_BY_TOPIC). Unlike
// the Java client it throws on TOPIC_NOT_EXIST rather than sending through TBW102's
// route, so the topic must exist before the first send. It asserts an `httpclient`
// option, which it uses only without `nameSrv`; a stub object satisfies it.

const { Producer, Message } = require('ali-ons');

const httpclient = { request: async () => { throw new Error('no http: nameSrv is given'); } };

async function main(opts) {
  const producer = new Producer({
    httpclient,
    nameSrv: opts.nameSrv,
    producerGroup: opts.group,
    instanceName: `produce-${process.pid}`,
  });
  await producer.ready();
  for (const m of opts.messages) {
    const msg = new Message(opts.topic, m.tags, Buffer.from(m.body, 'utf8'));
    if (m.keys) msg.keys = m.keys;
    for (const [k, v] of Object.entries(m.props || {})) msg.properties[k] = v;
    const r = await producer.send(msg);
    process.stdout.write(JSON.stringify({
      msgId: r.msgId,
      queueId: Number(r.messageQueue.queueId),
      brokerName: r.messageQueue.brokerName,
      queueOffset: String(r.queueOffset),
      sendStatus: r.sendStatus,
    }) + '\n');
  }
  await producer.close();
}

main(JSON.parse(process.argv[2])).then(() => process.exit(0), err => {
  process.stderr.write(`${err && err.stack || err}\n`);
  process.exit(1);
});
