// The README's TypeScript example, run exactly as written (imported by package name, as a user
// would) against a real corrald.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

import { skipReason, startDaemon } from './daemon.mjs';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');

export function readmeExample(language) {
  const readme = readFileSync(join(pkg, '../../README.md'), 'utf8');
  const m = readme.match(new RegExp(`<!-- readme-example: ${language} -->\\n\`\`\`\\w+\\n([\\s\\S]*?)\`\`\``));
  assert.ok(m, `README has no ${language} example`);
  return m[1];
}

test('the README TypeScript example works as written', { skip: skipReason() }, async () => {
  const code = readmeExample('typescript');
  assert.ok(code.trim().split('\n').length <= 5, 'five lines');
  const daemon = await startDaemon();
  // Inside the package directory, so `import 'corral-sandbox'` resolves to this package.
  const file = join(pkg, `.readme-example-${process.pid}.mjs`);
  try {
    writeFileSync(file, code);
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { ...process.env, CORRAL_SOCKET: daemon.socketPath }, timeout: 120_000,
    });
    assert.equal(stdout, 'hello from corral\n');
    assert.deepEqual((await daemon.client.listSessions()).filter((s) => s.state === 'active'), []);
  } finally {
    rmSync(file, { force: true });
    await daemon.stop();
  }
});

test('the README terminal example works as written', { skip: skipReason() }, async () => {
  const code = readmeExample('typescript-terminal');
  const daemon = await startDaemon();
  const file = join(pkg, `.readme-terminal-${process.pid}.mjs`);
  try {
    writeFileSync(file, code);
    const { stdout } = await promisify(execFile)(process.execPath, [file], {
      env: { ...process.env, CORRAL_SOCKET: daemon.socketPath }, timeout: 120_000,
    });
    assert.match(stdout, /[\r\n]42\r\n/, 'the terminal showed 42');
    assert.match(stdout, /exit code 3\n$/);
    assert.deepEqual((await daemon.client.listSessions()).filter((s) => s.state === 'active'), []);
  } finally {
    rmSync(file, { force: true });
    await daemon.stop();
  }
});
