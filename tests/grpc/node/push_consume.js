'use strict';
// Consume from mqstore's gRPC endpoint with the official RocketMQ 5.x Node.js client's
// PushConsumer (npm rocketmq-client-nodejs).
//
// Usage: node push_consume.js '<json options>'
//   {endpoints, group, topic, expect, timeoutMs, settleMs}
// Prints one JSON line per message the listener got ({messageId, body, messageGroup,
// deliveryAttempt, queueId}); the listener answers SUCCESS, so the client acks each one.
// Once `expect` distinct messages arrived (plus `settleMs` for the acks to go out and any
// extra delivery to show) or `timeoutMs` passed, shuts the consumer down and prints
// {"done": true|false, "count": n}. The client's log lines go to stderr.

const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
const log = level => (...args) => process.stderr.write(`${level} ${args.map(String).join(' ')}\n`);
const logger = { info: log('INFO'), warn: log('WARN'), error: log('ERROR'), debug() {} };

async function main(opts) {
  const seen = new Set();
  const consumer = new PushConsumer({
    namespace: '',
    endpoints: opts.endpoints,
    consumerGroup: opts.group,
    subscriptions: new Map([[opts.topic, '*']]),
    requestTimeout: 3000,
    logger,
    messageListener: {
      async consume(view) {
        seen.add(view.messageId);
        process.stdout.write(JSON.stringify({
          messageId: view.messageId,
          body: view.body.toString('utf-8'),
          messageGroup: view.messageGroup || null,
          deliveryAttempt: view.deliveryAttempt,
          queueId: view.messageQueue ? view.messageQueue.queueId : null,
        }) + '\n');
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  const deadline = Date.now() + opts.timeoutMs;
  while (seen.size < opts.expect && Date.now() < deadline) await sleep(50);
  const done = seen.size >= opts.expect;
  if (done) await sleep(opts.settleMs || 0);
  await consumer.shutdown();
  process.stdout.write(JSON.stringify({ done, count: seen.size }) + '\n');
}

main(JSON.parse(process.argv[2])).then(() => process.exit(0), err => {
  process.stderr.write(`push_consume failed: ${err && err.stack || err}\n`);
  process.exit(1);
});
