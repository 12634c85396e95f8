// Terminals over their WebSocket against a real corrald: a login shell on a PTY typed into as a
// person would (issue 14's checks from the client side: 42, stty size, Ctrl-C, scrollback on
// reattach, the exit code), over the Unix socket and over TCP with a bearer token.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { CorralClient, CorralError } from '../dist/index.js';
import { skipReason, startDaemon, startTcpDaemon } from './daemon.mjs';

const skip = skipReason();

/** Reads the terminal's output until `pattern` matches all of it so far (30 s at most). */
async function until(reader, seen, pattern) {
  const deadline = Date.now() + 30_000;
  while (!pattern.test(seen.text)) {
    const timer = new Promise((_, reject) => setTimeout(() => reject(new Error(`no ${pattern} in ${JSON.stringify(seen.text.slice(-500))}`)), deadline - Date.now()));
    const { done, value } = await Promise.race([reader.read(), timer]);
    if (done) throw new Error(`the output ended before ${pattern}: ${JSON.stringify(seen.text.slice(-500))}`);
    seen.text += Buffer.from(value).toString('utf8');
  }
  return seen.text;
}

function reading(terminal) {
  return { reader: terminal.output.getReader(), seen: { text: '' } };
}

describe('terminals over WebSocket', { skip }, () => {
  let daemon, sandbox;
  before(async () => {
    daemon = await startDaemon();
    const { id } = await daemon.client.createSession({ id: 'tty', policy: 'default' });
    sandbox = daemon.client.sandbox(id);
  });
  after(async () => daemon?.stop());

  test('types echo $((6*7)) and reads 42; resize shows in stty size; ping is answered', async () => {
    const terminal = await sandbox.terminal({ cols: 80, rows: 24 });
    assert.equal(terminal.record.terminal, true);
    const { reader, seen } = reading(terminal);
    await terminal.write('stty size; echo $((6*7))\r');
    await until(reader, seen, /[\r\n]24 80\r\n42\r\n/);
    await terminal.resize(132, 43);
    await terminal.write('stty size\r');
    await until(reader, seen, /[\r\n]43 132\r\n/);
    await terminal.ping();
    await assert.rejects(terminal.resize(0, 10), { code: 'invalid', message: /cols must be an integer in 1\.\.4096/ });
    await terminal.write('exit\r');
    assert.deepEqual(await terminal.exited, { exitCode: 0, status: 'exited', signal: null });
    assert.deepEqual(terminal.errors, []);
  });

  test('Ctrl-C interrupts the foreground sleep and the prompt comes back', async () => {
    const terminal = await sandbox.terminal();
    const { reader, seen } = reading(terminal);
    // The marker comes from the foreground job itself: bash gives a job the terminal before it
    // runs, so once it shows, ^C reaches the job and not bash (typing ^C right after an `echo` of
    // bash's own could land before the sleep is in the foreground, and miss it).
    await terminal.write("sh -c 'echo sleeping-$((3*3)); exec sleep 300'\r");
    await until(reader, seen, /[\r\n]sleeping-9\r\n/);
    const started = Date.now();
    await terminal.write('\x03');
    await terminal.write('echo status-$?\r');
    await until(reader, seen, /[\r\n]status-130\r\n/);  // 128 + SIGINT, from the shell itself
    assert.ok(Date.now() - started < 250_000, 'the sleep did not run out');
    await terminal.write('exit 0\r');
    assert.equal((await terminal.exited).exitCode, 0);
  });

  test('detaching leaves the terminal running; reattaching gets the scrollback first', async () => {
    const first = await sandbox.terminal();
    const { reader, seen } = reading(first);
    await first.write('echo marker-$((7*6))\r');
    await until(reader, seen, /[\r\n]marker-42\r\n/);
    reader.releaseLock();
    await first.close();
    await assert.rejects(first.exited, { code: 'detached' });
    await assert.rejects(first.write('x'), { code: 'closed' });
    assert.equal((await daemon.client.getProcess(sandbox.id, first.id)).running, true, 'closing only detached');

    // Two clients at once: both get the scrollback, both see what either types.
    const again = await sandbox.attachTerminal(first.id);
    const watcher = await daemon.client.attachTerminal(sandbox.id, first.id);
    const a = reading(again);
    const w = reading(watcher);
    // marker-42 was shown before these clients attached: only the scrollback can bring it.
    await until(a.reader, a.seen, /marker-42/);
    await until(w.reader, w.seen, /marker-42/);
    await again.write('echo after-$((1+1))\r');
    await until(w.reader, w.seen, /[\r\n]after-2\r\n/);
    await watcher.write('exit 7\r');
    const exit = await again.exited;
    assert.deepEqual(exit, { exitCode: 7, status: 'exited', signal: null });
    assert.deepEqual(await watcher.exited, exit);
    const rest = await a.reader.read().then(async function drain(r) { return r.done ? r : drain(await a.reader.read()); });
    assert.equal(rest.done, true, 'the output ends after the exit');
  });

  test('a command terminal iterates as bytes; a killed one exits with its signal', async () => {
    const echo = await sandbox.terminal({ command: 'printf "one\\ntwo\\n"; exit 3' });
    let text = '';
    for await (const chunk of echo) text += Buffer.from(chunk).toString();
    assert.match(text, /one\r\ntwo\r\n/, 'the pty turns \\n into \\r\\n');
    assert.equal((await echo.exited).exitCode, 3);

    const sleeper = await sandbox.terminal({ command: 'sleep 300' });
    await daemon.client.killProcess(sandbox.id, sleeper.id);
    const exit = await sleeper.exited;
    assert.equal(exit.status, 'killed');
    assert.ok(exit.exitCode >= 128, JSON.stringify(exit));
  });

  test('input beyond one message arrives whole (several messages, fragmented frames)', async () => {
    const terminal = await sandbox.terminal({ command: 'stty raw -echo; echo ready; head -c 700000 | wc -c' });
    const { reader, seen } = reading(terminal);
    await until(reader, seen, /ready/);
    await terminal.write(Buffer.alloc(700000, 'x'));
    await until(reader, seen, /700000/);
    assert.equal((await terminal.exited).exitCode, 0);
  });

  test('attaching to what is no terminal answers the API error', async () => {
    const proc = await sandbox.startProcess('sleep 300');
    await assert.rejects(sandbox.attachTerminal(proc.id), (err) => {
      assert.ok(err instanceof CorralError);
      assert.equal(err.code, 'not_a_terminal');
      assert.equal(err.status, 400);
      return true;
    });
    await assert.rejects(sandbox.attachTerminal('p9999'), { status: 404 });
    await proc.kill();
  });
});

describe('a terminal over TCP with a bearer token', { skip }, () => {
  test('the session token opens it; no token is 401', async () => {
    const daemon = await startTcpDaemon();
    try {
      const created = await daemon.client.createSession({ policy: 'default' });
      const tcp = new CorralClient({ url: daemon.url, token: created.token });
      const terminal = await tcp.sandbox(created.id).terminal({ command: 'echo over-$((40+2))', cols: 40, rows: 10 });
      let text = '';
      for await (const chunk of terminal) text += Buffer.from(chunk).toString();
      assert.match(text, /over-42/);
      assert.equal((await terminal.exited).exitCode, 0);
      const anonymous = new CorralClient({ url: daemon.url });
      await assert.rejects(anonymous.attachTerminal(created.id, terminal.id), { status: 401 });
      tcp.close();
    } finally {
      await daemon.stop();
    }
  });
});
