// Drives Fathom's A2A server with the official A2A JavaScript SDK (@a2a-js/sdk, found
// through NODE_PATH): agent card, send, follow-up, input-required, stream, get, cancel,
// resubscribe after dropping the stream (every event once), unknown task, another
// tenant's task, ListTasks (scoped to the caller's tenant, filters, pages), invalid
// params, no token, push configs (create, get, list, delete; the push itself is checked
// by the Go test's receiver at HOOK_URL/keep). Usage: node a2a_client.cjs BASE_URL TOKEN
// OTHER_TENANT_TOKEN READ_ONLY_TOKEN HOOK_URL. Prints "ok" and exits 0 when every check holds; else prints the
// failure and exits 1.
'use strict';
const { ClientFactory, ClientFactoryOptions, JsonRpcTransportFactory } = require('@a2a-js/sdk/client');
const { TaskState, Role } = require('@a2a-js/sdk');

const [base, token, otherToken, readToken, hook] = process.argv.slice(2);
let n = 0;

function check(cond, what, detail) {
  if (!cond) {
    throw new Error(`${what}${detail === undefined ? '' : ': ' + JSON.stringify(detail, null, 1)}`);
  }
}

function msg(text, extra) {
  n++;
  return { messageId: `m-${process.pid}-${n}`, role: Role.ROLE_USER, parts: [{ content: { $case: 'text', value: text } }],
    contextId: '', taskId: '', extensions: [], referenceTaskIds: [], metadata: undefined, ...extra };
}

async function client(tok) {
  const fetchImpl = (url, init) => fetch(url, tok ? { ...init, headers: { ...(init && init.headers), Authorization: `Bearer ${tok}` } } : init);
  const opts = ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { transports: [new JsonRpcTransportFactory({ fetchImpl })] });
  return new ClientFactory(opts).createFromUrl(base);
}

// legacyClient speaks A2A 0.3 (the SDK's compat layer) to the card's 0.3 interface.
async function legacyClient(tok, card) {
  const fetchImpl = (url, init) => fetch(url, { ...init, headers: { ...(init && init.headers), Authorization: `Bearer ${tok}` } });
  const opts = ClientFactoryOptions.createFrom(ClientFactoryOptions.default,
    { transports: [new JsonRpcTransportFactory({ fetchImpl, legacyCompat: { enabled: true } })] });
  const factory = new ClientFactory(opts);
  const v1 = await factory.createFromUrl(base); // the card as the SDK parses it
  const legacy = v1.agentCard || card;
  legacy.supportedInterfaces = legacy.supportedInterfaces.filter((i) => i.protocolVersion === '0.3');
  return factory.createFromAgentCard(legacy);
}

async function fails(p) {
  try {
    await p;
  } catch (e) {
    return e;
  }
  return null;
}

const text = (parts) => (parts || []).filter((p) => p.content && p.content.$case === 'text').map((p) => p.content.value).join('\n');
const seqOf = (ev) => ev.value.metadata && ev.value.metadata.fathom && ev.value.metadata.fathom.seq;

async function collect(gen, stopAfter) {
  const out = [];
  for await (const ev of gen) {
    out.push(ev.payload);
    if (stopAfter && stopAfter(out)) break;
  }
  return out;
}

// checkUpdates: after the task, one status update per event (seq rising by one from
// first), the result artifact before the completed status.
function statusSeqs(events) {
  return events.filter((e) => e.$case === 'statusUpdate').map(seqOf);
}

async function main() {
  // The agent card: public, v1.0 JSON-RPC, streaming, skills from the agents, bearer.
  const card = await (await fetch(`${base}/.well-known/agent-card.json`)).json();
  check(card.name === 'fathom' && card.capabilities.streaming === true, 'card name and streaming', card);
  check(card.supportedInterfaces[0].protocolBinding === 'JSONRPC' && card.supportedInterfaces[0].protocolVersion === '1.0' &&
    card.supportedInterfaces[0].url === `${base}/a2a`, 'card interface', card.supportedInterfaces);
  const skills = card.skills.map((s) => s.id);
  check(skills.includes('run') && skills.includes('researcher') && skills.includes('writer'), 'card skills', skills);
  check(card.securitySchemes.bearer.httpAuthSecurityScheme.scheme === 'Bearer', 'card security scheme', card.securitySchemes);
  check(card.defaultInputModes.includes('text/plain') && card.defaultOutputModes.includes('text/plain'), 'card modes', card);

  const a2a = await client(token);

  // Send (blocking): a new task = a new session with the text as goal; the answer is the
  // completed task with the result as an artifact.
  const t1 = await a2a.sendMessage({ message: msg('Write a haiku about the sea') });
  check(t1.status && t1.status.state === TaskState.TASK_STATE_COMPLETED, 'send: completed', t1);
  check(t1.id && t1.contextId === t1.id, 'send: ids', t1);
  check(text(t1.artifacts[0].parts) === 'An old silent pond', 'send: result artifact', t1.artifacts);
  check(text(t1.history[0].parts) === 'Write a haiku about the sea' && t1.history[0].role === Role.ROLE_USER, 'send: history', t1.history);

  // A message to the completed task: a follow-up turn.
  const t1b = await a2a.sendMessage({ message: msg('Another one, please', { taskId: t1.id }) });
  check(t1b.id === t1.id && t1b.status.state === TaskState.TASK_STATE_COMPLETED, 'follow-up: completed', t1b);
  check(t1b.history.length === 4 && text(t1b.history[2].parts) === 'Another one, please', 'follow-up: history', t1b.history);

  // Get: state, history (historyLength keeps the newest), artifacts.
  const g1 = await a2a.getTask({ id: t1.id, historyLength: 2 });
  check(g1.status.state === TaskState.TASK_STATE_COMPLETED && g1.history.length === 2 &&
    text(g1.history[0].parts) === 'Another one, please', 'get', g1);

  // Input required: the session waits for a human; the next message is the answer.
  const t2 = await a2a.sendMessage({ message: msg('Pick a colour for the fence') });
  check(t2.status.state === TaskState.TASK_STATE_INPUT_REQUIRED && text(t2.status.message.parts) === 'Which colour?',
    'input-required', t2);
  const t2b = await a2a.sendMessage({ message: msg('blue', { taskId: t2.id }) });
  check(t2b.status.state === TaskState.TASK_STATE_COMPLETED, 'answer: completed', t2b);
  check(t2b.history.some((m) => m.role === Role.ROLE_USER && text(m.parts) === 'blue'), 'answer: in history', t2b.history);

  // Stream: the task first, then a status update per event (seq 1, 2, ...), the result
  // as an artifact, and the completed state last.
  const s1 = await collect(a2a.sendMessageStream({ message: msg('Write a haiku about the wind') }));
  check(s1[0].$case === 'task', 'stream: task first', s1[0]);
  const seqs = statusSeqs(s1);
  check(seqs.length > 2 && seqs.every((s, i) => s === i + 1), 'stream: one update per event, in order', seqs);
  const art = s1.find((e) => e.$case === 'artifactUpdate');
  check(art && art.value.artifact.artifactId === 'result' && text(art.value.artifact.parts) === 'An old silent pond', 'stream: artifact', art);
  const last = s1[s1.length - 1];
  check(last.$case === 'statusUpdate' && last.value.status.state === TaskState.TASK_STATE_COMPLETED, 'stream: completed last', last);

  // Push configs: on a task waiting for input, two configs; one deleted; the answer
  // completes the task, whose status update the node pushes to the other (the Go test's
  // receiver checks it). Another tenant cannot set one.
  check(card.capabilities.pushNotifications === true, 'card: push notifications', card.capabilities);
  const t5 = await a2a.sendMessage({ message: msg('Pick a colour for the shed') });
  check(t5.status.state === TaskState.TASK_STATE_INPUT_REQUIRED, 'push: task waits for input', t5);
  const pushCfg = (id, path) => ({ tenant: '', id, taskId: t5.id, url: `${hook}/${path}`, token: 'js-token',
    authentication: { scheme: 'Bearer', credentials: 'js-credentials' } });
  const k = await a2a.createTaskPushNotificationConfig(pushCfg('', 'keep'));
  check(k.id && k.taskId === t5.id && k.url === `${hook}/keep` && k.authentication.scheme === 'Bearer' &&
    k.authentication.credentials === '' && k.token === '', 'push: create (an id given, the secrets not read back)', k);
  await a2a.createTaskPushNotificationConfig(pushCfg('gone', 'gone'));
  const kg = await a2a.getTaskPushNotificationConfig({ tenant: '', taskId: t5.id, id: k.id });
  check(kg.id === k.id && kg.url === k.url, 'push: get', kg);
  const pl = await a2a.listTaskPushNotificationConfig({ tenant: '', taskId: t5.id, pageSize: 0, pageToken: '' });
  check(pl.configs.length === 2 && pl.configs.map((c) => c.id).join(',') === `${k.id},gone`, 'push: list', pl);
  await a2a.deleteTaskPushNotificationConfig({ tenant: '', taskId: t5.id, id: 'gone' });
  await a2a.deleteTaskPushNotificationConfig({ tenant: '', taskId: t5.id, id: 'gone' }); // idempotent
  const pl2 = await a2a.listTaskPushNotificationConfig({ tenant: '', taskId: t5.id, pageSize: 0, pageToken: '' });
  check(pl2.configs.length === 1 && pl2.configs[0].id === k.id, 'push: list after delete', pl2);
  const e13 = await fails(a2a.getTaskPushNotificationConfig({ tenant: '', taskId: t5.id, id: 'gone' }));
  check(e13 && e13.envelopeCode === -32001, 'push: get of a deleted config', e13 && e13.message);
  const otherPush = await client(otherToken);
  const e14 = await fails(otherPush.createTaskPushNotificationConfig(pushCfg('theirs', 'theirs')));
  check(e14 && e14.envelopeCode === -32001, 'push: another tenant\'s task', e14 && e14.message);
  const t5b = await a2a.sendMessage({ message: msg('green', { taskId: t5.id }) });
  check(t5b.status.state === TaskState.TASK_STATE_COMPLETED, 'push: the answer completes the task', t5b);
  console.log(`push-task ${t5.id}`);

  // Cancel: a working task is canceled (the session is cancelled); twice is refused.
  const t3 = await a2a.sendMessage({ message: msg('A long job with many steps'), configuration: { acceptedOutputModes: [], returnImmediately: true } });
  check(t3.status.state === TaskState.TASK_STATE_WORKING, 'return immediately: working', t3);
  const e3w = await fails(a2a.sendMessage({ message: msg('and another thing', { taskId: t3.id }) }));
  check(e3w && e3w.envelopeCode === -32004, 'a message to a working task: unsupported operation', e3w && { code: e3w.envelopeCode, msg: e3w.message });
  const c3 = await a2a.cancelTask({ id: t3.id });
  check(c3.status.state === TaskState.TASK_STATE_CANCELED, 'cancel: canceled', c3);
  const g3 = await a2a.getTask({ id: t3.id });
  check(g3.status.state === TaskState.TASK_STATE_CANCELED, 'cancel: get says canceled', g3);
  const e3 = await fails(a2a.cancelTask({ id: t3.id }));
  check(e3 && e3.envelopeCode === -32002, 'cancel twice: task not cancelable', e3 && { name: e3.name, code: e3.envelopeCode, msg: e3.message });

  // Resubscribe after dropping the stream: the second stream starts with the task, then
  // the events after the last one received (Last-Event-ID): every event exactly once.
  const abort = new AbortController();
  const first = await collect(a2a.sendMessageStream({ message: msg('Another long job with many steps') }, { signal: abort.signal }),
    (out) => statusSeqs(out).length >= 3);
  abort.abort();
  const id4 = first[0].value.id;
  const got = statusSeqs(first);
  const second = await collect(a2a.resubscribeTask({ id: id4 }, { serviceParameters: { 'Last-Event-ID': String(got[got.length - 1]) } }));
  check(second[0].$case === 'task' && second[0].value.id === id4, 'resubscribe: task first', second[0]);
  const all = got.concat(statusSeqs(second));
  check(all.every((s, i) => s === i + 1), 'resubscribe: every event once', all);
  const end = second[second.length - 1];
  check(end.$case === 'statusUpdate' && end.value.status.state === TaskState.TASK_STATE_COMPLETED, 'resubscribe: ends completed', end);
  // Without Last-Event-ID a terminal task has nothing to subscribe to.
  const e4 = await fails(collect(a2a.resubscribeTask({ id: id4 })));
  check(e4 && (e4.envelopeCode === -32004 || /-32004/.test(e4.message)), 'subscribe to a completed task: unsupported operation', e4 && e4.message);

  // Unknown task, and another tenant's task: the same task-not-found.
  const e5 = await fails(a2a.getTask({ id: 'no-such-task' }));
  check(e5 && e5.envelopeCode === -32001 && e5.name === 'TaskNotFoundError', 'unknown task', e5 && { name: e5.name, code: e5.envelopeCode });
  const other = await client(otherToken);
  const e6 = await fails(other.getTask({ id: t1.id }));
  check(e6 && e6.envelopeCode === -32001 && e6.message === e5.message.replace('no-such-task', t1.id), 'another tenant\'s task is an unknown one',
    e6 && { msg: e6.message, unknown: e5.message });
  const e7 = await fails(other.sendMessage({ message: msg('hijack', { taskId: t1.id }) }));
  check(e7 && e7.envelopeCode === -32001, 'another tenant cannot send to the task', e7 && e7.message);

  // ListTasks: the caller's tasks only (another tenant's never), newest first, with the
  // spec's filters and pages.
  const o1 = await other.sendMessage({ message: msg('Write a haiku about another tenant') });
  check(o1.status.state === TaskState.TASK_STATE_COMPLETED, 'the other tenant\'s task', o1);
  const listReq = (extra) => ({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '',
    statusTimestampAfter: undefined, ...extra });
  const mine = [t1.id, t2.id, s1[0].value.id, t3.id, id4];
  const listed = await a2a.listTasks(listReq({ pageSize: 100 }));
  const ids = listed.tasks.map((t) => t.id);
  check(mine.every((id) => ids.includes(id)) && !ids.includes(o1.id) && listed.totalSize === ids.length && listed.nextPageToken === '',
    'list: the caller\'s tasks, not another tenant\'s', { ids, mine, other: o1.id, totalSize: listed.totalSize });
  check(ids.indexOf(id4) < ids.indexOf(t1.id) && listed.tasks.every((t) => t.contextId === t.id && t.status.timestamp &&
    t.artifacts.length === 0 && t.history.length === 0), 'list: newest first, no history or artifacts unless asked', listed.tasks);
  const theirs = await other.listTasks(listReq({}));
  check(theirs.tasks.length === 1 && theirs.tasks[0].id === o1.id && theirs.totalSize === 1, 'list: another tenant sees only its own', theirs);
  const canceled = await a2a.listTasks(listReq({ status: TaskState.TASK_STATE_CANCELED }));
  check(canceled.tasks.length === 1 && canceled.tasks[0].id === t3.id && canceled.tasks[0].status.state === TaskState.TASK_STATE_CANCELED,
    'list: status filter', canceled);
  const one = await a2a.listTasks(listReq({ contextId: t1.id, historyLength: 1, includeArtifacts: true }));
  check(one.tasks.length === 1 && one.tasks[0].id === t1.id && one.tasks[0].history.length === 1 &&
    text(one.tasks[0].artifacts[0].parts) === 'An old silent pond', 'list: contextId, historyLength, includeArtifacts', one);
  const none = await a2a.listTasks(listReq({ statusTimestampAfter: new Date(Date.now() + 3600e3).toISOString() }));
  check(none.tasks.length === 0 && none.totalSize === 0, 'list: statusTimestampAfter', none);
  let pageTok = '';
  const paged = [];
  do {
    const page = await a2a.listTasks(listReq({ pageSize: 2, pageToken: pageTok }));
    check(page.tasks.length <= 2 && page.pageSize === 2 && page.totalSize === ids.length, 'list: a page', page);
    paged.push(...page.tasks.map((t) => t.id));
    pageTok = page.nextPageToken;
  } while (pageTok);
  check(JSON.stringify(paged) === JSON.stringify(ids), 'list: the pages cover the listing once, in order', { paged, ids });
  const e12 = await fails(a2a.listTasks(listReq({ pageSize: 150 })));
  check(e12 && e12.envelopeCode === -32602, 'list: pageSize over 100 is invalid params', e12 && { code: e12.envelopeCode, msg: e12.message });

  // Invalid params: a message without parts.
  const e8 = await fails(a2a.sendMessage({ message: { ...msg(''), parts: [] } }));
  check(e8 && e8.envelopeCode === -32602, 'no parts: invalid params', e8 && { name: e8.name, code: e8.envelopeCode, msg: e8.message });

  // A read-only credential reads but may not send.
  const viewer = await client(readToken);
  const e11 = await fails(viewer.sendMessage({ message: msg('Write a haiku') }));
  check(e11 && e11.envelopeCode === -32000 && e11.data && e11.data[0].reason === 'permission_denied', 'read-only token: refused',
    e11 && { code: e11.envelopeCode, msg: e11.message, data: e11.data });

  // No token: refused with 401 (the card stays public).
  const anon = await client(null);
  const e9 = await fails(anon.sendMessage({ message: msg('Write a haiku') }));
  check(e9 && /401/.test(e9.message), 'no token: 401', e9 && e9.message);
  const e10 = await fails(anon.getTask({ id: t1.id }));
  check(e10 && /401/.test(e10.message), 'no token: get 401', e10 && e10.message);
  // A2A 0.3, through the SDK's compat layer: send, stream, get, unknown task.
  const old = await legacyClient(token, card);
  check(old.protocolVersion === '0.3', 'legacy client speaks 0.3', old.protocolVersion);
  const l1 = await old.sendMessage({ message: msg('Write a haiku about the rain') });
  check(l1.status.state === TaskState.TASK_STATE_COMPLETED && text(l1.artifacts[0].parts) === 'An old silent pond' &&
    text(l1.history[0].parts) === 'Write a haiku about the rain', '0.3 send', l1);
  const ls = await collect(old.sendMessageStream({ message: msg('Write a haiku about the snow') }));
  const lseqs = statusSeqs(ls);
  check(ls[0].$case === 'task' && lseqs.length > 2 && lseqs.every((x, i) => x === i + 1), '0.3 stream', lseqs);
  check(ls[ls.length - 1].value.status.state === TaskState.TASK_STATE_COMPLETED, '0.3 stream ends completed', ls[ls.length - 1]);
  const lg = await old.getTask({ id: l1.id });
  check(lg.status.state === TaskState.TASK_STATE_COMPLETED && lg.id === l1.id, '0.3 get', lg);
  const le = await fails(old.getTask({ id: 'no-such-task' }));
  check(le && le.envelopeCode === -32001, '0.3 unknown task', le && { name: le.name, code: le.envelopeCode, msg: le.message });
  // 0.3 on the wire: results not wrapped, kind discriminators, final on the last update.
  const raw = await fetch(`${base}/a2a`, { method: 'POST', headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream',
    Authorization: `Bearer ${token}` }, body: JSON.stringify({ jsonrpc: '2.0', id: 'r1', method: 'message/stream',
    params: { message: { kind: 'message', messageId: 'raw-1', role: 'user', parts: [{ kind: 'text', text: 'Write a haiku about fog' }] } } }) });
  const frames = (await raw.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)).result);
  const lastFrame = frames[frames.length - 1];
  check(frames[0].kind === 'task' && lastFrame.kind === 'status-update' && lastFrame.final === true && lastFrame.status.state === 'completed' &&
    frames.slice(1, -1).every((f) => f.final === false || f.kind === 'artifact-update'), '0.3 wire frames', frames.map((f) => [f.kind, f.final]));
  console.log('ok');
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : e);
  process.exit(1);
});
