// The Cloudflare-shaped sandbox (client.sandbox(id)) against a real corrald: a program written
// against @cloudflare/sandbox's ExecutionSession methods.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { CorralError, ProcessSetupError } from '../dist/index.js';
import { skipReason, startDaemon } from './daemon.mjs';

const skip = skipReason();

describe('client.sandbox(id)', { skip }, () => {
  let daemon, sandbox;
  before(async () => {
    daemon = await startDaemon();
    const { id } = await daemon.client.createSession({ id: 'cf' });
    sandbox = daemon.client.sandbox(id);
  });
  after(async () => daemon?.stop());

  test('exec returns Cloudflare\'s ExecResult; stream mode calls onOutput and onComplete', async () => {
    const r = await sandbox.exec('echo hi; echo no >&2; exit 2');
    assert.equal(r.success, false);
    assert.equal(r.exitCode, 2);
    assert.equal(r.stdout, 'hi\n');
    assert.equal(r.stderr, 'no\n');
    assert.equal(r.command, 'echo hi; echo no >&2; exit 2');
    assert.equal(typeof r.duration, 'number');
    assert.ok(!Number.isNaN(Date.parse(r.timestamp)));
    const seen = [];
    let completed;
    const s = await sandbox.exec('echo one; echo two', { stream: true, onOutput: (stream, data) => seen.push([stream, data]), onComplete: (res) => (completed = res) });
    assert.equal(s.stdout, 'one\ntwo\n');
    assert.equal(seen.map(([, d]) => d).join(''), 'one\ntwo\n');
    assert.equal(completed.success, true);
    const env = await sandbox.exec('echo "$X-$Y"', { env: { X: 'x', Y: undefined }, cwd: '/tmp' });
    assert.equal(env.stdout, 'x-\n');
  });

  test('exec with an aborted signal rejects with AbortError and stops the command', async () => {
    const controller = new AbortController();
    const running = sandbox.exec('echo up > cf-abort; sleep 300', { signal: controller.signal });
    while (!(await sandbox.exists('cf-abort')).exists) await new Promise((r) => setTimeout(r, 20));
    controller.abort();
    await assert.rejects(running, { name: 'AbortError' });
    const proc = (await sandbox.listProcesses()).find((p) => p.command.includes('cf-abort'));
    const { exitCode } = await proc.waitForExit(30000);  // rejects if it still ran after 30 s
    assert.ok(exitCode >= 128, String(exitCode));
    assert.equal(await proc.getStatus(), 'killed');
  });

  test('execStream gives the NDJSON event bytes', async () => {
    const text = await new Response(await sandbox.execStream('echo streamed')).text();
    const events = text.trim().split('\n').map((l) => JSON.parse(l));
    assert.equal(events[0].type, 'start');
    assert.equal(events.at(-1).type, 'exit');
    assert.ok(events.some((e) => e.type === 'stdout' && e.data === 'streamed\n'));
  });

  test('processes: start, get, list, logs, wait, kill', async () => {
    const p = await sandbox.startProcess('echo started; echo warn >&2');
    assert.deepEqual(await p.waitForExit(30000), { exitCode: 0 });
    assert.equal(await p.getStatus(), 'completed');
    assert.deepEqual(await sandbox.getProcessLogs(p.id), { stdout: 'started\n', stderr: 'warn\n', processId: p.id });
    assert.deepEqual(await p.getLogs(), { stdout: 'started\n', stderr: 'warn\n' });
    const fetched = await sandbox.getProcess(p.id);
    assert.equal(fetched.status, 'completed');
    assert.equal(fetched.exitCode, 0);
    assert.equal(await sandbox.getProcess('p999'), null);
    const long = await sandbox.startProcess('echo ready; sleep 300');
    assert.equal((await long.waitForLog('ready', 30000)).line, 'ready');
    assert.equal(long.status, 'running');
    assert.ok((await sandbox.listProcesses()).some((x) => x.id === long.id && x.status === 'running'));
    await sandbox.killProcess(long.id);
    assert.equal(await long.getStatus(), 'killed');
    const tail = await new Response(await sandbox.streamProcessLogs(p.id)).text();
    assert.ok(tail.includes('"type":"exit"'));
  });

  test('files: write, read, mkdir, exists, list, rename, move, delete', async () => {
    assert.equal((await sandbox.writeFile('/workspace/cf/a.txt', 'alpha')).success, true);
    const read = await sandbox.readFile('/workspace/cf/a.txt');
    assert.equal(read.content, 'alpha');
    assert.equal(read.encoding, 'utf-8');
    await sandbox.writeFile('/workspace/cf/b.bin', Buffer.from([0xff, 0, 1]).toString('base64'), { encoding: 'base64' });
    const bin = await sandbox.readFile('/workspace/cf/b.bin');
    assert.equal(bin.isBinary, true);
    assert.equal(bin.content, Buffer.from([0xff, 0, 1]).toString('base64'));
    assert.equal((await sandbox.mkdir('/workspace/cf/x/y', { recursive: true })).recursive, true);
    assert.equal((await sandbox.exists('/workspace/cf/x/y')).exists, true);
    assert.equal((await sandbox.exists('/workspace/cf/none')).exists, false);
    const listed = await sandbox.listFiles('/workspace/cf');
    assert.deepEqual(listed.files.map((f) => f.name).sort(), ['a.txt', 'b.bin', 'x']);
    const a = listed.files.find((f) => f.name === 'a.txt');
    assert.equal(a.type, 'file');
    assert.equal(a.size, 5);
    assert.equal(a.absolutePath, '/workspace/cf/a.txt');
    assert.equal(listed.files.find((f) => f.name === 'x').type, 'directory');
    assert.equal((await sandbox.renameFile('/workspace/cf/a.txt', '/workspace/cf/c.txt')).newPath, '/workspace/cf/c.txt');
    await sandbox.moveFile('/workspace/cf/c.txt', '/workspace/cf/x/c.txt');
    assert.equal((await sandbox.readFile('/workspace/cf/x/c.txt')).content, 'alpha');
    await sandbox.deleteFile('/workspace/cf/x/c.txt');
    assert.equal((await sandbox.exists('/workspace/cf/x/c.txt')).exists, false);
    await assert.rejects(sandbox.readFile('/workspace/cf/gone'), (err) => err instanceof CorralError && err.code === 'not_found');
  });

  test('setEnvVars sets, and undefined unsets, session variables', async () => {
    await sandbox.setEnvVars({ KEEP: 'kept', DROP: 'dropped' });
    assert.equal((await sandbox.exec('echo "$KEEP $DROP"')).stdout, 'kept dropped\n');
    await sandbox.setEnvVars({ DROP: undefined });
    assert.equal((await sandbox.exec('echo "$KEEP ${DROP-unset}"')).stdout, 'kept unset\n');
  });

  test('ports: a leased port is exposed and waited for', async () => {
    const { port } = await sandbox.leasePort();
    const server = await sandbox.startProcess(`exec python3 -m http.server ${port} --bind 127.0.0.1`);
    await sandbox.waitForPort(port, { timeout: 30000 });
    const { url } = await sandbox.exposePort(port, { hostname: 'ignored.example' });
    const body = await (await fetch(url)).text();
    assert.match(body, /Directory listing/);
    await server.kill();
    await assert.rejects(sandbox.exposePort(1, { hostname: 'x' }), (err) => err instanceof CorralError && err.code === 'port_not_leased');
  });

  test('sessions are shell contexts: cd and export carry over; killAllProcesses ends everything', async () => {
    const shell = await sandbox.createSession({ id: 'sh1' });
    assert.equal(shell.id, 'sh1');
    await sandbox.exec('mkdir -p deep && cd deep && export CARRIED=yes', { sessionId: 'sh1' });
    const seen = await sandbox.exec('pwd; echo $CARRIED', { sessionId: 'sh1' });
    assert.match(seen.stdout, /\/deep\nyes\n$/);
    assert.equal((await sandbox.getSession('sh1')).env.CARRIED, 'yes');
    await sandbox.deleteSession('sh1');
    await sandbox.startProcess('sleep 300');
    assert.ok((await sandbox.killAllProcesses()) >= 1);
    assert.ok((await sandbox.listProcesses()).every((p) => p.status !== 'running'));
  });

  test('terminal starts a session process on a pty and attaches to it (more in terminal.test.mjs)', async () => {
    const terminal = await sandbox.terminal({ command: 'sleep 300', cols: 100, rows: 30 });
    assert.equal(terminal.record.terminal, true);
    assert.equal(terminal.record.running, true);
    await sandbox.killAllProcesses();
    assert.equal((await terminal.exited).status, 'killed');
  });

  test('runCode keeps state in a code context, returns Cloudflare-shaped results, errors and timeouts', async () => {
    const context = await sandbox.createCodeContext({ language: 'python' });
    assert.equal(context.language, 'python');
    await sandbox.runCode('import json\nx = 40', { context });
    const r = await sandbox.runCode('print("hi")\nx + 2', { context });
    assert.equal(r.status, 'ok');
    assert.deepEqual(r.logs.stdout, ['hi\n']);
    assert.equal(r.results.length, 1);
    assert.equal(r.results[0].text, '42');
    assert.deepEqual(r.results[0].formats(), ['text']);
    const failed = await sandbox.runCode('{}["k"]', { context });
    assert.equal(failed.error?.name, 'KeyError');
    assert.ok(failed.error.traceback.some((line) => line.includes('<cell>')), failed.error.traceback.join(''));
    const timed = await sandbox.runCode('while True: pass', { context, timeout: 300 });
    assert.equal(timed.status, 'timeout');
    assert.equal(timed.error?.name, 'KeyboardInterrupt');
    const seen = [];
    const streamed = await sandbox.runCode('print("a")\nx', { context, onStdout: (o) => seen.push(o.text), onResult: (res) => seen.push(res.text) });
    assert.deepEqual(seen, ['a\n', '40']);
    assert.equal(streamed.results[0].text, '40');

    // JavaScript in the default context of its language (created once, reused).
    const js = await sandbox.runCode('var y = { a: [1, 2] }; y', { language: 'javascript' });
    assert.deepEqual(js.results[0].json, { a: [1, 2] });
    const again = await sandbox.runCode('y.a.length', { language: 'javascript' });
    assert.equal(again.results[0].text, '2');
    const listed = await sandbox.listCodeContexts();
    assert.equal(listed.length, 2, JSON.stringify(listed));
    for (const c of listed) await sandbox.deleteCodeContext(c.id);
    assert.equal((await sandbox.listCodeContexts()).length, 0);
  });

  test('gitCheckout clones inside the session and reports git\'s own failure', async () => {
    const made = await sandbox.exec('git init -q /workspace/src && git -C /workspace/src -c user.email=t@corral.test -c user.name=t commit -q --allow-empty -m init && echo made');
    assert.match(made.stdout, /made/, made.stderr);
    const cloned = await sandbox.gitCheckout('/workspace/src', { targetDir: '/workspace/dst' });
    assert.equal(cloned.success, true);
    assert.equal(cloned.targetDir, '/workspace/dst');
    const log = await sandbox.exec('git -C /workspace/dst log --format=%s');
    assert.equal(log.stdout.trim(), 'init');
    await assert.rejects(sandbox.gitCheckout('/workspace/no-such-repo', { targetDir: '/workspace/x' }), (err) => {
      assert.ok(err instanceof CorralError, String(err));
      assert.equal(err.code, 'git_failed', err.message);
      return true;
    });
  });

  test('watch streams the events of a directory as NDJSON', async () => {
    await sandbox.exec('mkdir -p /workspace/watched');
    const stop = new AbortController();
    const stream = await sandbox.watch('/workspace/watched', { signal: stop.signal });
    const reader = stream.getReader();
    const decoder = new TextDecoder();
    let pending = '';
    const next = async () => {
      for (;;) {
        const newline = pending.indexOf('\n');
        if (newline >= 0) {
          const line = pending.slice(0, newline);
          pending = pending.slice(newline + 1);
          return JSON.parse(line);
        }
        const { value, done } = await reader.read();
        if (done) throw new Error('the watch ended early');
        pending += decoder.decode(value, { stream: true });
      }
    };
    assert.equal((await next()).type, 'watching');
    await sandbox.writeFile('/workspace/watched/new.txt', 'hello');
    let event;
    do event = await next(); while (event.path !== '/workspace/watched/new.txt');
    assert.ok(['create', 'modify', 'move'].includes(event.type), JSON.stringify(event)); // an upload lands by rename
    stop.abort();
    await reader.cancel().catch(() => {});
  });

  // corrald takes no name for a process (POST .../processes has no `id`): the name is the client's.
  test('startProcess({processId}) names the process: get, logs, stream and kill by that name', async () => {
    const named = await sandbox.startProcess('echo named; sleep 300', { processId: 'web-server' });
    assert.equal(named.id, 'web-server');
    assert.match(named.record.id, /^p\d+$/);
    assert.equal((await named.waitForLog('named', 30000)).line, 'named');
    assert.equal((await sandbox.getProcess('web-server')).status, 'running');
    assert.ok((await sandbox.listProcesses()).some((p) => p.id === 'web-server' && p.record.id === named.record.id));
    assert.deepEqual(await sandbox.getProcessLogs('web-server'), { stdout: 'named\n', stderr: '', processId: 'web-server' });
    await assert.rejects(sandbox.startProcess('true', { processId: 'web-server' }),
      (err) => err instanceof CorralError && err.code === 'exists' && err.status === 409);
    await sandbox.killProcess('web-server');
    assert.equal((await sandbox.getProcess('web-server')).status, 'killed');
    assert.match(await new Response(await sandbox.streamProcessLogs('web-server')).text(), /"type":"exit"/);
    // Once it ended, the name may be given again.
    const again = await sandbox.startProcess('echo second', { processId: 'web-server' });
    await again.waitForExit(30000);
    assert.equal((await sandbox.getProcessLogs('web-server')).stdout, 'second\n');
  });

  // A background process does not take a shell context's turn (corrald refuses `shell` there):
  // it starts from the context's state instead.
  test('startProcess in a shell context starts in the context\'s cwd with its exported variables', async () => {
    const shell = await sandbox.createSession({ id: 'bg-ctx', cwd: '/tmp', env: { FROM_CREATE: 'c' } });
    await shell.exec('mkdir -p /tmp/ctxdir/sub && cd /tmp/ctxdir && export FROM_SHELL=s');
    const p = await shell.startProcess('pwd; echo "$FROM_CREATE $FROM_SHELL $OWN"', { env: { OWN: 'o' } });
    assert.equal(p.sessionId, 'bg-ctx');
    await p.waitForExit(30000);
    assert.deepEqual(await p.getLogs(), { stdout: '/tmp/ctxdir\nc s o\n', stderr: '' });
    const relative = await sandbox.startProcess('pwd', { sessionId: 'bg-ctx', cwd: 'sub' });
    await relative.waitForExit(30000);
    assert.equal((await relative.getLogs()).stdout, '/tmp/ctxdir/sub\n');
    await sandbox.deleteSession('bg-ctx');
  });

  test('exec of a command that cannot start rejects with corrald\'s reason (buffered and streamed)', async () => {
    const reason = (err) => {
      assert.ok(err instanceof ProcessSetupError, String(err));
      assert.equal(err.code, 'setup_failed');
      assert.match(err.message, /chdir `\/workspace\/no-such-dir`: ENOENT/);
      assert.equal(err.record.status, 'setup-failed');
      return true;
    };
    await assert.rejects(sandbox.exec('pwd', { cwd: 'no-such-dir' }), reason);
    let reported;
    await assert.rejects(sandbox.exec('pwd', { cwd: 'no-such-dir', stream: true, onError: (e) => (reported = e) }), reason);
    assert.ok(reported instanceof ProcessSetupError);
  });

  test('exec results carry corral\'s exit status: a timeout is not a plain SIGTERM', async () => {
    const timed = await sandbox.exec('sleep 5', { timeout: 300 });
    assert.equal(timed.status, 'timeout');
    assert.equal(timed.exitCode, 143);
    const streamed = await sandbox.exec('sleep 5', { timeout: 300, stream: true });
    assert.equal(streamed.status, 'timeout');
    assert.equal((await sandbox.exec('exit 3')).status, 'exited');
  });

  test('runCode without a context replaces a default context whose interpreter died', async () => {
    assert.equal((await sandbox.runCode('n = 1\nn')).results[0].text, '1');
    const [dead] = await sandbox.listCodeContexts();
    const { process: interpreter } = await daemon.client.getContext(sandbox.sid, dead.id);
    await daemon.client.killProcess(sandbox.sid, interpreter, { force: true });
    while ((await daemon.client.getContext(sandbox.sid, dead.id)).status !== 'dead') await new Promise((r) => setTimeout(r, 20));
    const fresh = await sandbox.runCode('2 + 3');
    assert.equal(fresh.status, 'ok');
    assert.equal(fresh.results[0].text, '5');
    // Died during a run: the run says so, and the next one gets a new interpreter.
    assert.equal((await sandbox.runCode('import os\nos._exit(3)')).status, 'context_died');
    assert.equal((await sandbox.runCode('7')).results[0].text, '7');
    for (const c of await sandbox.listCodeContexts()) await sandbox.deleteCodeContext(c.id);
  });

  test('listFiles of a relative path gives absolute paths; hidden entries stay hidden below a hidden directory', async () => {
    await sandbox.writeFile('rel/one.txt', '1');
    const listed = await sandbox.listFiles('rel');
    assert.deepEqual(listed.files.map((f) => [f.absolutePath, f.relativePath]), [['/workspace/rel/one.txt', 'one.txt']]);
    const here = await sandbox.listFiles('.');
    assert.ok(here.files.every((f) => f.absolutePath === `/workspace/${f.relativePath}`), JSON.stringify(here.files));
    // Hidden means any hidden component: a recursive listing leaves out what is below `.git` too.
    await sandbox.writeFile('rel/.git/config', 'x');
    const deep = await sandbox.listFiles('rel', { recursive: true });
    assert.deepEqual(deep.files.map((f) => f.relativePath), ['one.txt']);
    const all = await sandbox.listFiles('rel', { recursive: true, includeHidden: true });
    assert.deepEqual(all.files.map((f) => f.relativePath).sort(), ['.git', '.git/config', 'one.txt']);
  });
});
