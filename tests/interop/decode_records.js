'use strict';
// Decode a file of concatenated CommitLog records with a third-party decoder, ali-ons
// (the pure-JS RocketMQ client), and print one JSON object per message on stdout.
//
// Usage: node decode_records.js <file>
//
// ali-ons decodes pull-response bodies, which are exactly concatenated store records, with
// MessageDecoder.decodes() over a `byte` ByteBuffer. It inflates bodies whose sysflag has
// the COMPRESSED bit (zlib only). Longs are printed as decimal strings so no precision is
// lost in JSON.

const fs = require('fs');
const ByteBuffer = require('byte');
const decoder = require('ali-ons/lib/message/message_decoder');

function main(argv) {
  if (argv.length !== 1) {
    process.stderr.write('usage: node decode_records.js <file>\n');
    return 2;
  }
  const buf = fs.readFileSync(argv[0]);
  const messages = decoder.decodes(ByteBuffer.wrap(buf), true);
  for (const m of messages) {
    const body = m.body || Buffer.alloc(0);
    process.stdout.write(JSON.stringify({
      storeSize: m.storeSize,
      bodyCRC: m.bodyCRC,
      queueId: m.queueId,
      flag: m.flag,
      queueOffset: String(m.queueOffset),
      commitLogOffset: String(m.commitLogOffset),
      sysFlag: m.sysFlag,
      bornTimestamp: String(m.bornTimestamp),
      bornHost: m.bornHost,
      storeTimestamp: String(m.storeTimestamp),
      storeHost: m.storeHost,
      reconsumeTimes: m.reconsumeTimes,
      preparedTransactionOffset: String(m.preparedTransactionOffset),
      bodyBase64: body.toString('base64'),
      topic: m.topic,
      properties: m.properties,
      msgId: m.msgId,
    }) + '\n');
  }
  return 0;
}

process.exitCode = main(process.argv.slice(2));
