// The RFC 6455 framing of the terminal client, unit by unit: the frame decoder fed hostile input
// (what a compromised or buggy server could send), the encoder, and a connection to a hostile
// server on loopback (a listener this test makes) that must be refused cleanly: a close frame
// with the RFC's code, the output stream failing with the reason, no crash, no hang.
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';

import { CloseCode, CorralError, FrameDecoder, Opcode, Terminal, Transport, WebSocketProtocolError, encodeFrame } from '../dist/index.js';

/** A server frame (unmasked unless told): FIN, opcode, payload; `length` overrides the header. */
function frame(opcode, payload = Buffer.alloc(0), { fin = true, rsv = 0, mask = false, length } = {}) {
  payload = Buffer.from(payload);
  const n = length ?? payload.length;
  let head;
  if (n < 126 && length === undefined) head = Buffer.from([(fin ? 0x80 : 0) | rsv | opcode, n]);
  else if (n < 0x10000) {
    head = Buffer.alloc(4);
    head[0] = (fin ? 0x80 : 0) | rsv | opcode;
    head[1] = 126;
    head.writeUInt16BE(n, 2);
  } else {
    head = Buffer.alloc(10);
    head[0] = (fin ? 0x80 : 0) | rsv | opcode;
    head[1] = 127;
    head.writeBigUInt64BE(BigInt(n), 2);
  }
  if (mask) {
    head[1] |= 0x80;
    return Buffer.concat([head, Buffer.from([1, 2, 3, 4]), payload.map((b, i) => b ^ [1, 2, 3, 4][i & 3])]);
  }
  return Buffer.concat([head, payload]);
}

function refused(bytes, closeCode, pattern, limits) {
  const decoder = new FrameDecoder(limits);
  assert.throws(() => decoder.push(bytes), (err) => {
    assert.ok(err instanceof WebSocketProtocolError, String(err));
    assert.ok(err instanceof CorralError, 'a CorralError like every other failure');
    assert.equal(err.closeCode, closeCode, err.message);
    assert.match(err.message, pattern);
    return true;
  });
  // A decoder that refused stays refused: nothing after a violation is believed.
  assert.throws(() => decoder.push(frame(Opcode.text, 'ok')), WebSocketProtocolError);
}

describe('FrameDecoder', () => {
  test('whole, fragmented and byte-by-byte messages, control frames between fragments', () => {
    const d = new FrameDecoder();
    assert.deepEqual(d.push(frame(Opcode.text, '{"type":"exit"}')), [{ type: 'text', data: '{"type":"exit"}' }]);
    const bytes = Buffer.concat([
      frame(Opcode.binary, 'ab', { fin: false }), frame(Opcode.ping, 'p'),
      frame(Opcode.continuation, 'cd', { fin: false }), frame(Opcode.continuation, 'e'),
    ]);
    const seen = [];
    for (const b of bytes) seen.push(...d.push(Buffer.from([b])));  // one byte at a time
    assert.equal(seen.length, 2);
    assert.equal(seen[0].type, 'ping');
    assert.equal(Buffer.from(seen[0].data).toString(), 'p');
    assert.equal(seen[1].type, 'binary');
    assert.equal(Buffer.from(seen[1].data).toString(), 'abcde');
    // A UTF-8 character split across fragments is one character.
    const euro = Buffer.from('€');
    assert.deepEqual(d.push(Buffer.concat([frame(Opcode.text, euro.subarray(0, 1), { fin: false }), frame(Opcode.continuation, euro.subarray(1))])),
      [{ type: 'text', data: '€' }]);
    // 16- and 64-bit lengths.
    const mid = randomBytes(300);
    assert.deepEqual(Buffer.from(d.push(frame(Opcode.binary, mid))[0].data), mid);
    const big = randomBytes(70000);
    assert.deepEqual(Buffer.from(d.push(frame(Opcode.binary, big))[0].data), big);
    assert.deepEqual(d.push(frame(Opcode.close, Buffer.from([0x03, 0xe8, 0x6f, 0x6b]))), [{ type: 'close', code: 1000, reason: 'ok' }]);
    assert.deepEqual(d.push(frame(Opcode.close)), [{ type: 'close', code: undefined, reason: '' }]);
  });

  test('frames a server must not send are refused with the RFC close code', () => {
    refused(frame(Opcode.text, 'hi', { mask: true }), CloseCode.protocolError, /masked/);
    refused(frame(Opcode.text, 'hi', { rsv: 0x40 }), CloseCode.protocolError, /reserved bits/);
    refused(frame(0x3, 'x'), CloseCode.protocolError, /unknown opcode 0x3/);
    refused(frame(0xb, 'x'), CloseCode.protocolError, /unknown opcode 0xb/);
    refused(frame(Opcode.ping, 'x', { fin: false }), CloseCode.protocolError, /fragmented control/);
    refused(frame(Opcode.pong, Buffer.alloc(126)), CloseCode.protocolError, /longer than 125/);
    refused(frame(Opcode.continuation, 'x'), CloseCode.protocolError, /no message to continue/);
    refused(Buffer.concat([frame(Opcode.text, 'a', { fin: false }), frame(Opcode.binary, 'b')]), CloseCode.protocolError, /before the fragmented one ended/);
    refused(frame(Opcode.text, Buffer.from([0xc3, 0x28])), CloseCode.invalidData, /not UTF-8/);
    refused(frame(Opcode.close, Buffer.from([0x03])), CloseCode.protocolError, /1-byte body/);
    refused(frame(Opcode.close, Buffer.from([0x03, 0xed])), CloseCode.protocolError, /close code 1005/);
    refused(frame(Opcode.close, Buffer.from([0x03, 0xe8, 0xff])), CloseCode.invalidData, /not UTF-8/);
    refused(frame(Opcode.binary, 'short', { length: 5 }).subarray(0, 4), CloseCode.protocolError, /shortest form/);
  });

  test('a length beyond the limits is refused from the header alone, before any payload', () => {
    // 2^63 - 1 claimed: never allocated, never waited for.
    const huge = Buffer.from([0x82, 127, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    refused(huge, CloseCode.tooBig, /2\^53/);
    const topBit = Buffer.from([0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1]);
    refused(topBit, CloseCode.protocolError, /top bit/);
    const header = frame(Opcode.binary, Buffer.alloc(0), { length: (1 << 20) + 1 });
    refused(header, CloseCode.tooBig, /frame of 1048577 bytes/);
    refused(frame(Opcode.binary, Buffer.alloc(2000)), CloseCode.tooBig, /limit is 1000/, { maxFrameBytes: 1000 });
    // Fragments of an acceptable size that add up to too much.
    const parts = [];
    for (let i = 0; i < 5; i++) parts.push(frame(i ? Opcode.continuation : Opcode.binary, Buffer.alloc(1000), { fin: false }));
    refused(Buffer.concat(parts), CloseCode.tooBig, /more than 4096 bytes/, { maxFrameBytes: 1000, maxMessageBytes: 4096 });
  });

  test('random bytes end in messages or a protocol error, never anything else', () => {
    for (let round = 0; round < 2000; round++) {
      const d = new FrameDecoder({ maxFrameBytes: 4096, maxMessageBytes: 8192 });
      const input = randomBytes(1 + (round % 64));
      try {
        d.push(input.subarray(0, input.length >> 1));
        d.push(input.subarray(input.length >> 1));
      } catch (err) {
        assert.ok(err instanceof WebSocketProtocolError, `round ${round}: ${err}`);
      }
    }
  });
});

describe('encodeFrame', () => {
  test('client frames are masked with a fresh key and carry the payload', () => {
    for (const size of [0, 5, 125, 126, 65535, 65536]) {
      const payload = randomBytes(size);
      const a = encodeFrame(Opcode.binary, payload);
      const b = encodeFrame(Opcode.binary, payload);
      assert.equal(a[0], 0x82);
      assert.ok(a[1] & 0x80, 'mask bit set');
      const extra = size < 126 ? 0 : size < 65536 ? 2 : 8;
      const key = a.subarray(2 + extra, 6 + extra);
      const body = Buffer.from(a.subarray(6 + extra).map((byte, i) => byte ^ key[i & 3]));
      assert.deepEqual(body, payload);
      if (size >= 16) assert.notDeepEqual(a, b, 'a new mask per frame');
    }
    assert.equal(encodeFrame(Opcode.text, Buffer.from('x'), false)[0], 0x01, 'FIN clear');
  });
});

/**
 * A hostile "corrald" on a loopback port this test opened: it accepts the upgrade (correctly, or
 * as `accept` says), then sends `bytes`. Resolves the server and a promise of what the client sent.
 */
async function hostileServer(bytes, { accept } = {}) {
  let received = Buffer.alloc(0);
  let gotClose;
  const closeFrame = new Promise((r) => (gotClose = r));
  const server = createServer((socket) => {
    let head = '';
    socket.on('data', (chunk) => {
      if (!head.includes('\r\n\r\n')) {
        head += chunk.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        const key = /sec-websocket-key: (\S+)/i.exec(head)[1];
        const token = /authorization: (.*)\r/i.exec(head)?.[1];
        const digest = accept ?? createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
        socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${digest}\r\nX-Token: ${token}\r\n\r\n`);
        socket.write(bytes);
        return;
      }
      received = Buffer.concat([received, chunk]);
      // The client's frames are masked: unmask the first one's 2-byte close code.
      if (received.length >= 8 && (received[0] & 0x0f) === Opcode.close) {
        const key = received.subarray(2, 6);
        gotClose(((received[6] ^ key[0]) << 8) | (received[7] ^ key[1]));
      }
    });
    socket.on('error', () => {});
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const transport = new Transport({ url: `http://127.0.0.1:${server.address().port}`, token: 't0ken' });
  return { server, transport, closeFrame };
}

describe('a hostile server', () => {
  for (const [what, bytes, code, pattern] of [
    ['a masked frame', frame(Opcode.binary, 'x', { mask: true }), CloseCode.protocolError, /masked/],
    ['a 2^62-byte frame header', Buffer.from([0x82, 127, 0x40, 0, 0, 0, 0, 0, 0, 0]), CloseCode.tooBig, /2\^53/],
    ['an oversized frame header', frame(Opcode.binary, Buffer.alloc(0), { length: 2 << 20 }), CloseCode.tooBig, /limit is 1048576/],
    ['text that is not UTF-8', frame(Opcode.text, Buffer.from([0xff, 0xfe])), CloseCode.invalidData, /not UTF-8/],
  ]) {
    test(`sending ${what} is refused cleanly`, async () => {
      const { server, transport, closeFrame } = await hostileServer(Buffer.concat([frame(Opcode.binary, 'before '), bytes]));
      try {
        const terminal = await Terminal.attach(transport, 's1', 'p1');
        const chunks = [];
        await assert.rejects(async () => { for await (const c of terminal) chunks.push(Buffer.from(c)); }, (err) => {
          assert.ok(err instanceof WebSocketProtocolError, String(err));
          assert.match(err.message, pattern);
          return true;
        });
        assert.equal(Buffer.concat(chunks).toString(), 'before ', 'what came before the bad frame was delivered');
        await assert.rejects(terminal.exited, WebSocketProtocolError);
        assert.equal(await closeFrame, code, 'the client said why in its close frame');
        await assert.rejects(terminal.write('more'), { code: 'closed' });
      } finally {
        server.close();
      }
    });
  }

  test('an upgrade answer with a wrong Sec-WebSocket-Accept is refused', async () => {
    const { server, transport } = await hostileServer(Buffer.alloc(0), { accept: 'bm90IHRoZSByaWdodCBvbmU=' });
    try {
      await assert.rejects(Terminal.attach(transport, 's1', 'p1'), { code: 'bad_response', message: /Sec-WebSocket-Accept/ });
    } finally {
      server.close();
    }
  });
});
