// Follows an A2A task with the official A2A JavaScript SDK (@a2a-js/sdk, found through
// NODE_PATH) through node A, and when that stream breaks (the test kills A), resubscribes
// through node B with the last event's seq as Last-Event-ID until the task settles.
// Usage: node a2a_failover.cjs URL_A URL_B TASK_ID TOKEN. Prints one line per status
// update ("seq N STATE"), "dropped REASON" when a stream breaks, then "done STATE" and
// exits 0 once the task is completed; on any other end it prints "fail REASON", exits 1.
'use strict';
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = require('@a2a-js/sdk/client');
const { TaskState } = require('@a2a-js/sdk');

const [urlA, urlB, id, token] = process.argv.slice(2);

async function client(base) {
  const fetchImpl = (url, init) => fetch(url, { ...init, headers: { ...(init && init.headers), Authorization: `Bearer ${token}` } });
  const opts = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] });
  return new ClientFactory(opts).createFromUrl(base);
}

const stateName = (s) => (TaskState[s] !== undefined && typeof s === 'number' ? TaskState[s] : String(s));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// last is the seq of the last event received.
let last = 0;

// follow streams the task from the events after last, printing each status update, and
// returns whether the task completed; it throws when the stream breaks.
async function follow(a2a) {
  let done = false;
  for await (const ev of a2a.resubscribeTask({ id }, { serviceParameters: { 'Last-Event-ID': String(last) } })) {
    const p = ev.payload;
    if (p.$case !== 'statusUpdate') continue;
    const seq = p.value.metadata && p.value.metadata.fathom && p.value.metadata.fathom.seq;
    if (!seq) continue;
    last = seq;
    console.log(`seq ${seq} ${stateName(p.value.status.state)}`);
    done = p.value.status.state === TaskState.TASK_STATE_COMPLETED;
  }
  return done;
}

async function main() {
  const a = await client(urlA);
  const b = await client(urlB); // both cards read while both nodes live
  try {
    if (await follow(a)) {
      console.log('fail the task completed before node A was killed');
      process.exit(1);
    }
    console.log('dropped the stream through A ended');
  } catch (e) {
    console.log(`dropped ${e && e.message}`);
  }
  const deadline = Date.now() + 120000;
  while (Date.now() < deadline) {
    // B may still route to the dead member until it leaves B's view: the subscription
    // then fails before any event, and the client tries again.
    try {
      if (await follow(b)) {
        console.log('done TASK_STATE_COMPLETED');
        return;
      }
      console.log('dropped the stream through B ended before the task completed');
    } catch (e) {
      console.log(`dropped ${e && e.message}`);
    }
    await sleep(500);
  }
  console.log(`fail no completion through B after seq ${last}`);
  process.exit(1);
}

main().catch((e) => {
  console.log(`fail ${e && e.stack}`);
  process.exit(1);
});
