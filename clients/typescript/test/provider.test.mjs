// The AI SDK provider against a real corrald: a program written against HarnessV1SandboxProvider
// and HarnessV1NetworkSandboxSession, with corral in place of another provider.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { CorralClient, CorralError, ProcessSetupError, corralSessionId, createCorralSandboxProvider } from '../dist/index.js';
import { skipReason, startDaemon } from './daemon.mjs';

const skip = skipReason();
const text = (stream) => new Response(stream).text();

describe('createCorralSandboxProvider', { skip }, () => {
  let daemon, provider, session;
  before(async () => {
    daemon = await startDaemon();
    provider = createCorralSandboxProvider({ socketPath: daemon.socketPath });
    session = await provider.createSession({ sessionId: 'agent-1' });
  });
  after(async () => {
    await session?.destroy();
    await daemon?.stop();
  });

  test('is a harness-sandbox-v1 provider named corral', () => {
    assert.equal(provider.specificationVersion, 'harness-sandbox-v1');
    assert.equal(provider.providerId, 'corral');
  });

  test('createSession names the session by sessionId and reports its working directory', async () => {
    assert.equal(session.id, 'agent-1');
    assert.match(session.defaultWorkingDirectory, /^\//);
    assert.match(session.description, /agent-1/);
    const { stdout } = await session.run({ command: 'pwd' });
    assert.equal(stdout.trim(), session.defaultWorkingDirectory);
  });

  test('run collects stdout, stderr and the exit code', async () => {
    const r = await session.run({ command: 'echo out; echo err >&2; exit 3' });
    assert.deepEqual(r, { exitCode: 3, stdout: 'out\n', stderr: 'err\n', status: 'exited' });
  });

  test('run passes env and workingDirectory', async () => {
    await session.writeTextFile({ path: 'sub/keep', content: '' });
    const r = await session.run({ command: 'echo "$GREETING $(basename "$PWD")"', env: { GREETING: 'hi' }, workingDirectory: 'sub' });
    assert.equal(r.stdout, 'hi sub\n');
  });

  test('spawn streams output before the process exits, then wait() gives the exit code', async () => {
    await session.writeTextFile({ path: 'go', content: '' });
    await session.run({ command: 'rm -f go' });
    const proc = await session.spawn({ command: 'echo first; while [ ! -e go ]; do sleep 0.05; done; echo second; exit 7' });
    assert.equal(typeof proc.pid, 'number');
    const reader = proc.stdout.getReader();
    const first = await reader.read();
    assert.equal(new TextDecoder().decode(first.value), 'first\n');  // the process still waits for `go`
    await session.writeTextFile({ path: 'go', content: '' });
    let rest = '';
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value);
    assert.equal(rest, 'second\n');
    assert.deepEqual(await proc.wait(), { exitCode: 7, status: 'exited' });
    assert.deepEqual(proc.skipped, { stdout: 0, stderr: 0 });
    assert.equal(await text(proc.stderr), '');
  });

  test('a spawned process outlives the connection of the client that spawned it', async () => {
    const other = createCorralSandboxProvider({ socketPath: daemon.socketPath });
    const mine = await other.resumeSession({ sessionId: session.id });
    const proc = await mine.spawn({ command: 'sleep 300' });
    other.client.close();  // drops every connection of that client, its output stream included
    await new Promise((r) => setTimeout(r, 200));
    assert.equal((await provider.client.getProcess(session.id, proc.id)).running, true);
    await provider.client.killProcess(session.id, proc.id);
  });

  test('kill() stops the process tree and is idempotent', async () => {
    const proc = await session.spawn({ command: 'sleep 300 & sleep 300; wait' });
    await Promise.all([proc.kill(), proc.kill()]);
    await proc.kill();
    const { exitCode } = await proc.wait();
    // Reported as a shell does: 128+15 (SIGTERM, then grace) or 128+9 (killed outright).
    assert.ok([143, 137].includes(exitCode), String(exitCode));
    const record = await provider.client.getProcess(session.id, proc.id);
    assert.equal(record.running, false);
    assert.equal(record.status, 'killed');
  });

  test('an abortSignal kills a spawned process and wait() rejects with an AbortError', async () => {
    const controller = new AbortController();
    const proc = await session.spawn({ command: 'sleep 300', abortSignal: controller.signal });
    controller.abort();
    await assert.rejects(proc.wait(), { name: 'AbortError' });
    const final = await provider.client.waitProcess(session.id, proc.id, { timeoutMs: 30000 });
    assert.equal(final.finished, true);
    assert.equal(final.running, false);
  });

  test('an abortSignal rejects run with an AbortError and stops the command', async () => {
    const controller = new AbortController();
    const running = session.run({ command: 'echo started > aborted.txt; sleep 300', abortSignal: controller.signal });
    while ((await session.readTextFile({ path: 'aborted.txt' })) === null) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await assert.rejects(running, { name: 'AbortError' });
    const procs = await provider.client.listProcesses(session.id);
    const sleeper = procs.find((p) => p.command?.includes('aborted.txt'));
    const final = await provider.client.waitProcess(session.id, sleeper.id, { timeoutMs: 30000 });
    assert.equal(final.running, false);
    await assert.rejects(session.run({ command: 'true', abortSignal: AbortSignal.abort() }), { name: 'AbortError' });
  });

  test('files: parents are created, missing files read as null, line ranges are 1-based inclusive', async () => {
    await session.writeTextFile({ path: 'deep/er/notes.txt', content: 'one\ntwo\nthree\nfour\n' });
    assert.equal(await session.readTextFile({ path: 'deep/er/notes.txt' }), 'one\ntwo\nthree\nfour\n');
    assert.equal(await session.readTextFile({ path: 'deep/er/notes.txt', startLine: 2, endLine: 3 }), 'two\nthree\n');
    assert.equal(await session.readTextFile({ path: 'deep/er/notes.txt', startLine: 3, endLine: 99 }), 'three\nfour\n');
    assert.equal(await session.readTextFile({ path: 'deep/er/notes.txt', startLine: 4 }), 'four\n');
    assert.equal(await session.readFile({ path: 'nope.txt' }), null);
    assert.equal(await session.readBinaryFile({ path: 'nope.txt' }), null);
    assert.equal(await session.readTextFile({ path: 'nope/nope.txt' }), null);
    const { stdout } = await session.run({ command: 'cat deep/er/notes.txt | wc -l' });
    assert.equal(stdout.trim(), '4');
  });

  test('files: bytes and streams round-trip', async () => {
    const bytes = new Uint8Array(70000).map((_, i) => (i * 7) % 256);
    await session.writeBinaryFile({ path: 'bin/blob', content: bytes });
    assert.deepEqual(await session.readBinaryFile({ path: 'bin/blob' }), bytes);
    const chunks = ['streamed ', 'in ', 'pieces\n'];
    const stream = new ReadableStream({ pull(c) { chunks.length ? c.enqueue(new TextEncoder().encode(chunks.shift())) : c.close(); } });
    await session.writeFile({ path: 'streamed.txt', content: stream });
    assert.equal(await text(await session.readFile({ path: 'streamed.txt' })), 'streamed in pieces\n');
    await session.writeTextFile({ path: 'latin1.txt', content: 'café', encoding: 'latin1' });
    assert.deepEqual([...(await session.readBinaryFile({ path: 'latin1.txt' }))], [0x63, 0x61, 0x66, 0xe9]);
    assert.equal(await session.readTextFile({ path: 'latin1.txt', encoding: 'latin1' }), 'café');
  });

  test('ports: leased ports show up, resolve to endpoints, and setPorts releases the others', async () => {
    const a = await provider.client.leasePort(session.id);
    const b = await provider.client.leasePort(session.id);
    await session.refresh();
    assert.deepEqual([...session.ports].sort(), [a.port, b.port].sort());
    const endpoint = await session.getPortEndpoint({ port: a.port });
    assert.match(endpoint.url, new RegExp(`^http://127\\.0\\.0\\.1:${a.port}`));
    assert.match(await session.getPortUrl({ port: a.port, protocol: 'ws' }), /^ws:/);
    await session.setPorts([a.port]);
    assert.deepEqual([...session.ports], [a.port]);
    await assert.rejects(session.setPorts([a.port, 1]), (err) => err instanceof CorralError && err.code === 'port_not_leased');
    await assert.rejects(session.getPortEndpoint({ port: b.port }), (err) => err instanceof CorralError && err.status === 404);
  });

  test('restricted() has no infra surface and acts with the restricted token', async () => {
    const restricted = session.restricted();
    for (const name of ['stop', 'destroy', 'setNetworkPolicy', 'setPorts', 'getPortEndpoint', 'getPortUrl', 'ports'])
      assert.equal(name in restricted, false, name);
    assert.equal((await restricted.run({ command: 'echo ok' })).stdout, 'ok\n');
    await restricted.writeTextFile({ path: 'from-restricted.txt', content: 'x' });
    assert.equal(await session.readTextFile({ path: 'from-restricted.txt' }), 'x');
    // It talks with the restricted token: corrald itself refuses it what it may not do.
    await assert.rejects(restricted.client.endSession(session.id), (err) => err instanceof CorralError && err.status === 403);
    await assert.rejects(restricted.client.leasePort(session.id), (err) => err instanceof CorralError && err.status === 403);
  });

  test('setNetworkPolicy goes to PATCH .../network and the session record shows it', async () => {
    await session.setNetworkPolicy({ mode: 'custom', allowedHosts: ['registry.npmjs.org'] });
    const egress = (await provider.client.getSession(session.id)).egress;
    assert.equal(egress.mode, 'custom');
    assert.deepEqual(egress.allowedHosts, ['registry.npmjs.org']);
    await assert.rejects(session.setNetworkPolicy({ mode: 'custom', allowedCIDRs: ['10.1/8'] }),
      (err) => err instanceof CorralError && err.status === 400 && /allowedCIDRs\[0\]/.test(err.message));
    await session.setNetworkPolicy({ mode: 'deny-all' });
  });

  test('resumeSession reattaches by id; stop and destroy are idempotent', async () => {
    const other = await provider.createSession({ sessionId: 'agent-2' });
    await other.writeTextFile({ path: 'kept.txt', content: 'still here' });
    const resumed = await provider.resumeSession({ sessionId: 'agent-2' });
    assert.equal(resumed.id, 'agent-2');
    assert.equal(await resumed.readTextFile({ path: 'kept.txt' }), 'still here');
    const sleeper = await other.spawn({ command: 'sleep 300' });
    await other.stop();
    await other.stop();
    await other.destroy();
    await resumed.destroy();
    assert.equal((await sleeper.wait()).exitCode >= 128, true);
    await assert.rejects(provider.resumeSession({ sessionId: 'agent-2' }), (err) => err instanceof CorralError);
    await assert.rejects(provider.resumeSession({ sessionId: 'never-made' }),
      (err) => err instanceof CorralError && err.code === 'no_such_session' && err.status === 404);
  });

  test('createSession: onFirstCreate runs once on the new session; an aborted signal rejects', async () => {
    let calls = 0;
    const s = await provider.createSession({
      sessionId: 'agent-3',
      onFirstCreate: async (created) => { calls++; await created.writeTextFile({ path: 'boot.txt', content: 'booted' }); },
    });
    assert.equal(calls, 1);
    assert.equal(await s.readTextFile({ path: 'boot.txt' }), 'booted');
    await s.destroy();
    await assert.rejects(provider.createSession({ abortSignal: AbortSignal.abort() }), { name: 'AbortError' });
  });

  // The AI SDK's sessionId is opaque; corrald's ids are 1-64 of [A-Za-z0-9_-].
  test('createSession maps a sessionId corrald would refuse onto a valid id, the same one resumeSession finds', async () => {
    const opaque = `harness-${'0123456789abcdef'.repeat(5)}/ünï code`;
    const s = await provider.createSession({ sessionId: opaque });
    assert.match(s.id, /^[A-Za-z0-9_-]{1,64}$/);
    assert.equal(s.id, corralSessionId(opaque));
    assert.notEqual(corralSessionId(opaque), corralSessionId(opaque + ' '));
    assert.equal(corralSessionId('plain_id-1'), 'plain_id-1');
    await s.writeTextFile({ path: 'mark', content: 'm' });
    const resumed = await provider.resumeSession({ sessionId: opaque });
    assert.equal(resumed.id, s.id);
    assert.equal(await resumed.readTextFile({ path: 'mark' }), 'm');
    await s.destroy();
  });

  test('run and spawn of a command that cannot start reject with corrald\'s reason', async () => {
    const reason = (err) => {
      assert.ok(err instanceof ProcessSetupError, String(err));
      assert.equal(err.code, 'setup_failed');
      assert.match(err.message, /chdir `[^`]*\/no-such-dir`: ENOENT/);
      return true;
    };
    await assert.rejects(session.run({ command: 'pwd', workingDirectory: 'no-such-dir' }), reason);
    await assert.rejects(session.spawn({ command: 'pwd', workingDirectory: 'no-such-dir' }), reason);
  });

  test('a command stopped at its timeout says so: status timeout and a note on stderr', async () => {
    const timed = createCorralSandboxProvider({ socketPath: daemon.socketPath, commandTimeoutMs: 300 });
    const s = await timed.createSession();
    try {
      const r = await s.run({ command: 'echo before >&2; sleep 5' });
      assert.equal(r.exitCode, 143);
      assert.equal(r.status, 'timeout');
      assert.match(r.stderr, /^before\n\[corral: timed out after 300 ms and stopped with SIGTERM\]\n$/);
    } finally {
      await s.destroy();
      timed.client.close();
    }
  });

  test('spawn says on stderr what output was lost before its stream attached (skipped)', async () => {
    // A client whose output stream attaches only after the process ended: everything but the
    // last 64 KiB (the policy's limits.output) is gone by then, and corrald says so as `skipped`.
    class LateClient extends CorralClient {
      async streamProcess(sid, proc, options) {
        await this.waitProcess(sid, proc, { timeoutMs: 30000 });
        return super.streamProcess(sid, proc, options);
      }
    }
    const late = createCorralSandboxProvider({
      client: new LateClient({ socketPath: daemon.socketPath }), policyYaml: 'extends: default\nlimits: {output: 64Ki}',
    });
    const s = await late.createSession();
    try {
      const proc = await s.spawn({ command: 'seq 1 100000' });  // 588895 bytes
      const [stdout, stderr, exit] = await Promise.all([text(proc.stdout), text(proc.stderr), proc.wait()]);
      assert.equal(exit.exitCode, 0);
      assert.equal(stdout.length, 65536);
      assert.deepEqual(proc.skipped, { stdout: 588895 - 65536, stderr: 0 });
      assert.equal(stderr, `[corral: ${588895 - 65536} bytes of stdout were lost before this stream attached (beyond the policy's limits.output)]\n`);
    } finally {
      await s.destroy();
      late.client.close();
    }
  });

  test('getPortEndpoint with https gives the port\'s forward with the https scheme', async () => {
    const { port } = await provider.client.leasePort(session.id);
    assert.equal((await session.getPortEndpoint({ port, protocol: 'https' })).url,
      (await session.getPortEndpoint({ port })).url.replace(/^http:/, 'https:'));
    assert.match(await session.getPortUrl({ port, protocol: 'https' }), /^https:\/\/127\.0\.0\.1:/);
    await provider.client.releasePort(session.id, port);
  });

  // The harness hands restricted() to tools as the view that cannot stop the sandbox; after a
  // resume without the restricted token it must not be this client's (full) rights.
  test('restricted() after resumeSession: the remembered or given token, else no_token', async () => {
    const created = await provider.createSession({ sessionId: 'agent-r' });
    // The same provider remembers the tokens of the sessions it created.
    const again = await provider.resumeSession({ sessionId: 'agent-r' });
    assert.deepEqual((await again.restricted().client.listSessions()).map((x) => x.id), ['agent-r']);
    await assert.rejects(again.restricted().client.endSession('agent-r'), (err) => err instanceof CorralError && err.status === 403);
    // Another process (another provider) has no token: restricted() refuses, clearly.
    const elsewhere = createCorralSandboxProvider({ socketPath: daemon.socketPath });
    const resumed = await elsewhere.resumeSession({ sessionId: 'agent-r' });
    assert.throws(() => resumed.restricted(), (err) => err instanceof CorralError && err.code === 'no_token');
    // ... unless it is handed the token corrald answered at creation.
    const made = await provider.client.createSession({ id: 'agent-r2' });
    const withToken = await elsewhere.resumeSession({ sessionId: 'agent-r2', restrictedToken: made.restrictedToken });
    const view = withToken.restricted();
    assert.equal((await view.run({ command: 'echo ok' })).stdout, 'ok\n');
    await assert.rejects(view.client.endSession('agent-r2'), (err) => err instanceof CorralError && err.status === 403);
    await assert.rejects(view.client.getSession('agent-r'), (err) => err instanceof CorralError && err.status === 404);
    elsewhere.client.close();
    await created.destroy();
    await provider.client.endSession('agent-r2');
  });
});
