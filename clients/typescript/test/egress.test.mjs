// Issue 15, "the AI SDK's three modes map one to one": setNetworkPolicy of the AI SDK provider
// against a real corrald whose --egress-hosts-file maps test names to HTTP servers this test runs
// on host loopback addresses (127.0.0.31 and .32, never anything else), and what a curl inside an
// isolated session then reaches through the daemon's proxy, mode by mode.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createCorralSandboxProvider } from '../dist/index.js';
import { skipReason, startDaemon } from './daemon.mjs';

const skip = skipReason();

/** An HTTP server on `address` answering "hello from NAME"; resolves once it listens. */
async function origin(address, name) {
  const server = createServer((req, res) => res.end(`hello from ${name}`));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, address, resolve);
  });
  return server;
}

describe('setNetworkPolicy enforces each mode of the AI SDK', { skip }, () => {
  let daemon, provider, session, registry, other, hostsDir;
  before(async () => {
    registry = await origin('127.0.0.31', 'registry');
    other = await origin('127.0.0.32', 'other');
    hostsDir = mkdtempSync('/tmp/corral-ts-egress-');
    const hosts = join(hostsDir, 'hosts');
    writeFileSync(hosts, '127.0.0.31 registry.example.test\n127.0.0.32 other.example.test\n');
    daemon = await startDaemon(['--egress-hosts-file', hosts]);
    provider = createCorralSandboxProvider({ socketPath: daemon.socketPath });
    session = await provider.createSession({ sessionId: 'egress-1' });
  });
  after(async () => {
    await session?.destroy();
    await daemon?.stop();
    registry?.close();
    other?.close();
    if (hostsDir) rmSync(hostsDir, { recursive: true, force: true });
  });

  /** The HTTP status curl gets for `host` inside the session (through the proxy env). */
  async function fetchStatus(host, server) {
    const url = `http://${host}:${server.address().port}/`;
    const { stdout } = await session.run({ command: `curl -s -o /dev/null --max-time 30 -w '%{http_code}' ${url}` });
    return stdout;
  }

  test('deny-all: nothing, not even an allowed name', async () => {
    await session.setNetworkPolicy({ mode: 'deny-all' });
    assert.equal(await fetchStatus('registry.example.test', registry), '403');
  });

  test('custom allowedHosts: that name and nothing else', async () => {
    await session.setNetworkPolicy({ mode: 'custom', allowedHosts: ['registry.example.test'] });
    assert.equal(await fetchStatus('registry.example.test', registry), '200');
    assert.equal(await fetchStatus('other.example.test', other), '403');
  });

  test('custom allowedCIDRs and deniedCIDRs: the CIDR opens, the denied one wins', async () => {
    await session.setNetworkPolicy({ mode: 'custom', allowedCIDRs: ['127.0.0.32/32'] });
    assert.equal(await fetchStatus('127.0.0.32', other), '200');
    assert.equal(await fetchStatus('127.0.0.31', registry), '403');
    await session.setNetworkPolicy({ mode: 'custom', allowedCIDRs: ['127.0.0.0/24'], deniedCIDRs: ['127.0.0.32/32'] });
    assert.equal(await fetchStatus('127.0.0.31', registry), '200');
    assert.equal(await fetchStatus('127.0.0.32', other), '403');
  });

  test('allow-all: every name; the record shows the mode and counts the refusals', async () => {
    await session.setNetworkPolicy({ mode: 'allow-all' });
    assert.equal(await fetchStatus('registry.example.test', registry), '200');
    assert.equal(await fetchStatus('other.example.test', other), '200');
    const egress = (await provider.client.getSession(session.id)).egress;
    assert.equal(egress.mode, 'allow-all');
    assert.equal(egress.refused, 4);
  });
});
