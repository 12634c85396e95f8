// CorralClient against a real corrald: errors, NDJSON streams, tokens.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { CorralClient, CorralError } from '../dist/index.js';
import { skipReason, startDaemon, startTcpDaemon } from './daemon.mjs';

const skip = skipReason();

describe('CorralClient', { skip }, () => {
  let daemon, client, sid;
  before(async () => {
    daemon = await startDaemon();
    client = daemon.client;
    sid = (await client.createSession({ policy: 'default' })).id;
  });
  after(async () => daemon?.stop());

  test('health answers the daemon facts', async () => {
    const h = await client.health();
    assert.equal(h.status, 'ok');
    assert.equal(typeof h.version, 'string');
    assert.equal(h.portRange.first, daemon.portFirst);
  });

  test('errors are CorralError with the API code, message and status', async () => {
    await assert.rejects(client.getSession('missing'), (err) =>
      err instanceof CorralError && err.code === 'no_such_session' && err.status === 404 && /missing/.test(err.message));
    await assert.rejects(client.run(sid, { command: 'true', bogus: 1 }), (err) =>
      err instanceof CorralError && err.status === 400 && /bogus/.test(err.message));
    await assert.rejects(client.createSession({ policyYaml: 'name: x\nlimits: { memory: lots }\n' }), (err) =>
      err instanceof CorralError && err.code === 'invalid_policy' && err.status === 422 && Array.isArray(err.diagnostics));
    await assert.rejects(client.readFileBytes(sid, '../../etc/shadow'), (err) => err instanceof CorralError && err.status === 403);
    const gone = new CorralClient({ socketPath: daemon.dir + '/no-such.sock' });
    await assert.rejects(gone.health(), (err) => err instanceof CorralError && err.code === 'unreachable' && err.status === 0);
  });

  test('exec streams start, output and exactly one final exit event, in seq order', async () => {
    const stream = await client.exec(sid, { command: 'echo a; echo b >&2; printf "\\000\\001"; exit 4' });
    const events = [];
    for await (const ev of stream) events.push(ev);
    assert.equal(events[0].type, 'start');
    assert.deepEqual(events.map((e) => e.seq), events.map((_, i) => i));
    const finals = events.filter((e) => e.type === 'exit' || e.type === 'error');
    assert.equal(finals.length, 1);
    assert.equal(events.at(-1).type, 'exit');
    assert.equal(events.at(-1).exitCode, 4);
    const out = Buffer.concat(events.filter((e) => e.type === 'stdout').map((e) =>
      e.dataBase64 !== undefined ? Buffer.from(e.dataBase64, 'base64') : Buffer.from(e.data)));
    assert.deepEqual([...out], [...Buffer.from('a\n'), 0, 1]);
  });

  test('exec events as a web ReadableStream; process streams resume from an offset', async () => {
    const stream = (await client.exec(sid, { command: 'echo hello' })).toReadableStream();
    const types = [];
    for await (const ev of stream) types.push(ev.type);
    assert.deepEqual(types.filter((t) => t !== 'stderr'), ['start', 'stdout', 'exit']);
    const proc = await client.spawn(sid, { command: 'echo 0123456789' });
    await client.waitProcess(sid, proc.id, { timeoutMs: 30000 });
    let data = '';
    for await (const ev of await client.streamProcess(sid, proc.id, { stream: 'stdout', offset: 4 }))
      if (ev.type === 'stdout') { assert.equal(ev.offset, 4); data += ev.data; }
    assert.equal(data, '456789\n');
    const logs = await client.logs(sid, proc.id, { offset: 2, limit: 3 });
    assert.equal(logs.data, '234');
  });

  test('stdin, signals and background processes', async () => {
    const proc = await client.spawn(sid, { command: 'read line; echo "got $line"', stdinOpen: true });
    await client.writeStdin(sid, proc.id, 'ping\n', { eof: true });
    const final = await client.waitProcess(sid, proc.id, { timeoutMs: 30000 });
    assert.equal(final.finished, true);
    assert.equal((await client.logs(sid, proc.id)).data, 'got ping\n');
    const sleeper = await client.spawn(sid, { argv: ['sleep', '300'] });
    assert.deepEqual(await client.signalProcess(sid, sleeper.id, 'TERM'), { id: sleeper.id, signal: 'SIGTERM' });
    const ended = await client.waitProcess(sid, sleeper.id, { timeoutMs: 30000 });
    assert.equal(ended.running, false);
    assert.equal(ended.signal, 'SIGTERM');
    assert.ok((await client.listProcesses(sid)).some((p) => p.id === sleeper.id));
  });

  test('a session token only opens its own session; TCP-less unix requests carry full rights', async () => {
    const created = await client.createSession({ id: 'tokened' });
    const own = client.withToken(created.token);
    assert.equal((await own.run('tokened', { command: 'echo mine' })).stdout, 'mine\n');
    await assert.rejects(own.getSession(sid), (err) => err instanceof CorralError && err.status === 404);
    const restricted = client.withToken(created.restrictedToken);
    await assert.rejects(restricted.patchEnv('tokened', { set: { A: '1' } }), (err) => err.status === 403);
    assert.deepEqual(await own.patchEnv('tokened', { set: { A: '1' } }), { ...created.env, A: '1' });
    const report = await own.endSession('tokened');
    assert.equal(report.id, 'tokened');
  });

  test('policies: list and validate', async () => {
    const { presets } = await client.listPolicies();
    assert.ok(presets.some((p) => p.name === 'default'));
    const ok = await client.validatePolicy('name: mine\nextends: none\n');
    assert.equal(ok.valid, true);
    const bad = await client.validatePolicy('name: mine\nnope: 1\n');
    assert.equal(bad.valid, false);
    assert.ok(bad.diagnostics.length > 0);
  });
});

describe('CorralClient over TCP', { skip }, () => {
  test('url + token reaches the session; no token is 401', async () => {
    const daemon = await startTcpDaemon();
    try {
      const created = await daemon.client.createSession({ id: 'over-tcp' });
      const tcp = new CorralClient({ url: daemon.url, token: created.token });
      assert.equal((await tcp.run('over-tcp', { command: 'echo tcp' })).stdout, 'tcp\n');
      await assert.rejects(new CorralClient({ url: daemon.url }).health(),
        (err) => err instanceof CorralError && err.status === 401);
      tcp.close();
    } finally {
      await daemon.stop();
    }
  });
});
