// Starts a real corrald for the tests: the binary from the CMake build dir ($CORRAL_BUILD_DIR,
// default ../../build relative to this package), a temp Unix socket, state dir and cgroup
// instance, a port range of its own. stop() ends every session, then the daemon by its pid.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { existsSync, mkdtempSync, mkdirSync, openSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { CorralClient } from '../dist/index.js';

const here = dirname(fileURLToPath(import.meta.url));
export const buildDir = resolve(process.env.CORRAL_BUILD_DIR ?? join(here, '../../../build'));
export const corrald = join(buildDir, 'supervisor/corrald');

/** Why these tests cannot run here, or undefined. */
export function skipReason() {
  if (process.getuid?.() !== 0) return 'needs root (corrald makes cgroups and namespaces)';
  if (!existsSync(corrald)) return `corrald is not built at ${corrald} (set CORRAL_BUILD_DIR)`;
  return undefined;
}

export async function startDaemon(extraArgs = []) {
  const dir = mkdtempSync('/tmp/corral-ts-test-');
  const socketPath = join(dir, 'corrald.sock');
  mkdirSync(join(dir, 'policies'));
  // 40 ports per test process, 9000-9799, below the kernel's ephemeral range and apart from the
  // C++ suites' ranges (10000-32759).
  const portFirst = 9000 + (process.pid % 20) * 40;
  const log = openSync(join(dir, 'corrald.log'), 'w');
  const child = spawn(corrald, [
    '--socket', socketPath, '--state-dir', join(dir, 'state'), '--policy-dir', join(dir, 'policies'),
    '--instance', `corral-ts-${process.pid}-${Date.now() % 100000}`,
    '--port-range', `${portFirst}-${portFirst + 39}`, ...extraArgs,
  ], { stdio: ['ignore', log, log] });
  const exited = new Promise((r) => child.once('exit', (code, signal) => r({ code, signal })));
  let gone = false;
  void exited.then(() => (gone = true));
  const client = new CorralClient({ socketPath });
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await client.health();
      break;
    } catch (err) {
      if (gone || Date.now() > deadline) {
        const text = readFileSync(join(dir, 'corrald.log'), 'utf8');
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`corrald did not start: ${err.message}\n${text}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  return {
    dir, socketPath, client, pid: child.pid, portFirst,
    log: () => readFileSync(join(dir, 'corrald.log'), 'utf8'),
    async stop() {
      try {
        for (const s of await client.listSessions()) if (s.state === 'active') await client.endSession(s.id).catch(() => {});
      } catch { /* the daemon may be gone already */ }
      client.close();
      if (!gone) {
        process.kill(child.pid, 'SIGTERM');
        const timer = setTimeout(() => { if (!gone) process.kill(child.pid, 'SIGKILL'); }, 60_000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A daemon that also listens on a free loopback TCP port; `url` is its base URL. */
export async function startTcpDaemon(extraArgs = []) {
  const port = await new Promise((resolve) => {
    const srv = createServer().listen(0, '127.0.0.1', () => { const p = srv.address().port; srv.close(() => resolve(p)); });
  });
  const daemon = await startDaemon(['--listen', `127.0.0.1:${port}`, ...extraArgs]);
  return { ...daemon, url: `http://127.0.0.1:${port}` };
}
