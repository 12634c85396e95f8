// A WebSocket client (RFC 6455) over node:http's upgrade, for corrald's terminal sockets. Node 20
// has no WebSocket client of its own and the package has no runtime dependency, so the framing is
// here: masked client frames, fragmented messages both ways, ping/pong, the close handshake, text
// vs binary messages, and limits on what the server may send (a frame or message beyond them, a
// masked server frame, reserved bits, unknown opcodes, bad control frames or text that is not
// UTF-8 close the socket with the RFC's code instead of being believed).
import { createHash, randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { Socket } from 'node:net';

import { CorralError, errorFromBody } from './errors.js';
import { readAll, type Transport } from './transport.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';  // RFC 6455 section 1.3

export const Opcode = { continuation: 0x0, text: 0x1, binary: 0x2, close: 0x8, ping: 0x9, pong: 0xa } as const;

/** Close codes this client sends (RFC 6455 section 7.4.1). */
export const CloseCode = { normal: 1000, goingAway: 1001, protocolError: 1002, invalidData: 1007, tooBig: 1009 } as const;

/** What the decoder accepts from the server. */
export type FrameLimits = {
  /** Largest payload of one frame (default 1 MiB). */
  maxFrameBytes?: number;
  /** Largest message, all its fragments together (default 4 MiB). */
  maxMessageBytes?: number;
};

/** A whole message or control frame, as the decoder hands it on. */
export type Message =
  | { type: 'text'; data: string }
  | { type: 'binary'; data: Uint8Array }
  | { type: 'ping' | 'pong'; data: Uint8Array }
  | { type: 'close'; code: number | undefined; reason: string };

/** The server broke the protocol: the socket is closed with `closeCode`. */
export class WebSocketProtocolError extends CorralError {
  readonly closeCode: number;
  constructor(closeCode: number, message: string) {
    super('bad_frame', message, 0);
    this.name = 'WebSocketProtocolError';
    this.closeCode = closeCode;
  }
}

/**
 * Turns the server's bytes into messages. Push bytes as they arrive; each call answers the
 * messages completed so far. The first violation throws WebSocketProtocolError — from this push
 * when it completed no message before it, else from the next one (and `failure` has it), so what
 * came before a bad frame is still delivered. After it the decoder only throws: the connection
 * must close.
 */
export class FrameDecoder {
  private readonly maxFrame: number;
  private readonly maxMessage: number;
  private chunks: Buffer[] = [];
  private buffered = 0;
  private fragments: Buffer[] = [];
  private fragmentBytes = 0;
  private fragmentType: 'text' | 'binary' | null = null;
  private failed: WebSocketProtocolError | undefined;

  constructor(limits: FrameLimits = {}) {
    this.maxFrame = limits.maxFrameBytes ?? 1 << 20;
    this.maxMessage = limits.maxMessageBytes ?? 4 << 20;
  }

  /** The violation that stopped this decoder, if any. */
  get failure(): WebSocketProtocolError | undefined {
    return this.failed;
  }

  push(bytes: Uint8Array): Message[] {
    if (this.failed) throw this.failed;
    if (bytes.length) {
      this.chunks.push(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
      this.buffered += bytes.length;
    }
    const out: Message[] = [];
    try {
      for (;;) {
        const message = this.next();
        if (message === undefined) break;
        if (message !== null) out.push(message);
      }
    } catch (err) {
      this.failed = err as WebSocketProtocolError;
      if (out.length === 0) throw err;
    }
    return out;
  }

  /** One frame: a message, null for a frame that completes none (a fragment), undefined for "need more". */
  private next(): Message | null | undefined {
    if (this.buffered < 2) return undefined;
    const head = this.peek(Math.min(this.buffered, 14));
    const fin = (head[0]! & 0x80) !== 0;
    const rsv = head[0]! & 0x70;
    const opcode = head[0]! & 0x0f;
    const masked = (head[1]! & 0x80) !== 0;
    let length = head[1]! & 0x7f;
    // Checked before the length arrives whole: a hostile header is refused at once.
    if (rsv !== 0) throw fail(CloseCode.protocolError, 'reserved bits set (no extension was negotiated)');
    if (masked) throw fail(CloseCode.protocolError, 'a server frame is masked (RFC 6455 5.1 forbids it)');
    const control = opcode >= 0x8;
    if (![0x0, 0x1, 0x2, 0x8, 0x9, 0xa].includes(opcode)) throw fail(CloseCode.protocolError, `unknown opcode 0x${opcode.toString(16)}`);
    if (control && !fin) throw fail(CloseCode.protocolError, 'a fragmented control frame');
    if (control && length > 125) throw fail(CloseCode.protocolError, 'a control frame longer than 125 bytes');
    let offset = 2;
    if (length === 126) {
      if (head.length < 4) return undefined;
      length = head.readUInt16BE(2);
      if (length < 126) throw fail(CloseCode.protocolError, 'a frame length not in its shortest form');
      offset = 4;
    } else if (length === 127) {
      if (head.length < 10) return undefined;
      const high = head.readUInt32BE(2);
      const low = head.readUInt32BE(6);
      if (high & 0x80000000) throw fail(CloseCode.protocolError, 'a 64-bit frame length with its top bit set');
      if (high === 0 && low < 0x10000) throw fail(CloseCode.protocolError, 'a frame length not in its shortest form');
      if (high >= 0x200000) throw fail(CloseCode.tooBig, 'a frame longer than 2^53 bytes');
      length = high * 0x100000000 + low;
      offset = 10;
    }
    if (length > this.maxFrame) throw fail(CloseCode.tooBig, `a frame of ${length} bytes (the limit is ${this.maxFrame})`);
    if (!control) {
      if (opcode === Opcode.continuation && this.fragmentType === null) throw fail(CloseCode.protocolError, 'a continuation frame with no message to continue');
      if (opcode !== Opcode.continuation && this.fragmentType !== null) throw fail(CloseCode.protocolError, 'a new message before the fragmented one ended');
      if (this.fragmentBytes + length > this.maxMessage)
        throw fail(CloseCode.tooBig, `a message of more than ${this.maxMessage} bytes`);
    }
    if (this.buffered < offset + length) return undefined;
    this.consume(offset);
    const payload = this.consume(length);

    if (control) return controlMessage(opcode, payload);
    if (opcode !== Opcode.continuation) this.fragmentType = opcode === Opcode.text ? 'text' : 'binary';
    this.fragments.push(payload);
    this.fragmentBytes += length;
    if (!fin) return null;
    const whole = this.fragments.length === 1 ? this.fragments[0]! : Buffer.concat(this.fragments);
    const type = this.fragmentType!;
    this.fragments = [];
    this.fragmentBytes = 0;
    this.fragmentType = null;
    if (type === 'binary') return { type, data: new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength) };
    return { type, data: utf8(whole) };
  }

  private peek(n: number): Buffer {
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    return this.chunks[0]!.subarray(0, n);
  }

  private consume(n: number): Buffer {
    if (n === 0) return Buffer.alloc(0);
    if (this.chunks[0]!.length < n) this.chunks = [Buffer.concat(this.chunks)];
    const first = this.chunks[0]!;
    const taken = first.subarray(0, n);
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return Buffer.from(taken);  // a copy: the caller keeps it past the next push
  }
}

function fail(code: number, what: string): WebSocketProtocolError {
  return new WebSocketProtocolError(code, `corrald sent a bad WebSocket frame: ${what}`);
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });
function utf8(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw fail(CloseCode.invalidData, 'a text message that is not UTF-8');
  }
}

function controlMessage(opcode: number, payload: Buffer): Message {
  if (opcode === Opcode.ping) return { type: 'ping', data: payload };
  if (opcode === Opcode.pong) return { type: 'pong', data: payload };
  if (payload.length === 0) return { type: 'close', code: undefined, reason: '' };
  if (payload.length === 1) throw fail(CloseCode.protocolError, 'a close frame with a 1-byte body');
  const code = payload.readUInt16BE(0);
  // 1000-1003, 1007-1014 and 3000-4999 may be sent; 1004-1006, 1015 and the rest may not.
  const valid = (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
  if (!valid) throw fail(CloseCode.protocolError, `close code ${code} may not be sent`);
  return { type: 'close', code, reason: utf8(payload.subarray(2)) };
}

/** One client frame: FIN as told, the payload masked with a fresh random key. */
export function encodeFrame(opcode: number, payload: Uint8Array, fin = true): Buffer {
  const length = payload.length;
  const extra = length < 126 ? 0 : length < 0x10000 ? 2 : 8;
  const frame = Buffer.allocUnsafe(2 + extra + 4 + length);
  frame[0] = (fin ? 0x80 : 0) | opcode;
  if (extra === 0) {
    frame[1] = 0x80 | length;
  } else if (extra === 2) {
    frame[1] = 0x80 | 126;
    frame.writeUInt16BE(length, 2);
  } else {
    frame[1] = 0x80 | 127;
    frame.writeUInt32BE(Math.floor(length / 0x100000000), 2);
    frame.writeUInt32BE(length >>> 0, 6);
  }
  const keyAt = 2 + extra;
  randomBytes(4).copy(frame, keyAt);
  for (let i = 0; i < length; i++) frame[keyAt + 4 + i] = payload[i]! ^ frame[keyAt + (i & 3)]!;
  return frame;
}

export type WebSocketOptions = FrameLimits & {
  /** Client messages larger than this go as several frames (default 64 KiB). */
  fragmentBytes?: number;
  /** How long close() waits for the server's close frame before it cuts the connection (default 5 s). */
  closeTimeoutMs?: number;
  signal?: AbortSignal;
};

export type WebSocketHandlers = {
  /** A text or binary message. */
  message(message: { type: 'text'; data: string } | { type: 'binary'; data: Uint8Array }): void;
  /** The connection is gone: `error` says why when it did not end with a close handshake. */
  closed(code: number | undefined, reason: string, error?: Error): void;
};

/** An open WebSocket connection (after the 101). */
export class WebSocketConnection {
  private readonly decoder: FrameDecoder;
  private readonly fragmentBytes: number;
  private readonly closeTimeoutMs: number;
  private closeSent = false;
  private done = false;
  private closeTimer: NodeJS.Timeout | undefined;
  private readonly pings = new Map<string, () => void>();

  constructor(private readonly socket: Socket, head: Buffer, private readonly handlers: WebSocketHandlers, options: WebSocketOptions = {}) {
    this.decoder = new FrameDecoder(options);
    this.fragmentBytes = options.fragmentBytes ?? 64 << 10;
    this.closeTimeoutMs = options.closeTimeoutMs ?? 5000;
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.received(chunk));
    socket.on('error', (err) => this.finish(undefined, '', new CorralError('unreachable', `terminal socket: ${err.message}`, 0)));
    socket.on('close', () => this.finish(undefined, '', this.closeSent ? undefined : new CorralError('connection_lost', 'the terminal socket closed without a close frame', 0)));
    if (head.length) queueMicrotask(() => this.received(head));
  }

  /** Stops reading the socket (backpressure: the server's writes then wait). */
  pause(): void {
    this.socket.pause();
  }
  resume(): void {
    this.socket.resume();
  }

  /** Whether the socket can still send. */
  get open(): boolean {
    return !this.done && !this.closeSent;
  }

  /** Sends one message, fragmented past `fragmentBytes`; resolves once the socket took it. */
  async send(data: string | Uint8Array): Promise<void> {
    if (!this.open) throw new CorralError('closed', 'the terminal socket is closed', 0);
    const binary = typeof data !== 'string';
    const payload = binary ? data : Buffer.from(data, 'utf8');
    let opcode: number = binary ? Opcode.binary : Opcode.text;
    let at = 0;
    let ok = true;
    do {
      const end = Math.min(payload.length, at + this.fragmentBytes);
      ok = this.socket.write(encodeFrame(opcode, payload.subarray(at, end), end === payload.length));
      opcode = Opcode.continuation;
      at = end;
    } while (at < payload.length);
    if (!ok) await this.drained();
  }

  /** Sends a ping; resolves when its pong arrives (rejects if the connection ends first). */
  ping(data: Uint8Array = randomBytes(8)): Promise<void> {
    if (!this.open) return Promise.reject(new CorralError('closed', 'the terminal socket is closed', 0));
    const key = Buffer.from(data).toString('hex');
    const answered = new Promise<void>((resolve) => this.pings.set(key, resolve));
    this.socket.write(encodeFrame(Opcode.ping, data));
    return Promise.race([answered, this.whenDone()]).then(() => {
      if (!this.pings.has(key)) return;
      this.pings.delete(key);
      throw new CorralError('closed', 'the terminal socket closed before the pong', 0);
    });
  }

  /** Starts the close handshake; resolves once the connection is gone. */
  close(code: number = CloseCode.normal, reason = ''): Promise<void> {
    if (!this.done && !this.closeSent) this.sendClose(code, reason);
    return this.whenDone();
  }

  private finished: Array<() => void> = [];
  private whenDone(): Promise<void> {
    if (this.done) return Promise.resolve();
    return new Promise((resolve) => this.finished.push(resolve));
  }

  private drained(): Promise<void> {
    return new Promise((resolve) => {
      const go = () => {
        this.socket.off('drain', go);
        this.socket.off('close', go);
        resolve();
      };
      this.socket.on('drain', go);
      this.socket.on('close', go);
    });
  }

  private sendClose(code: number, reason: string) {
    this.closeSent = true;
    const body = Buffer.alloc(2 + Buffer.byteLength(reason));
    body.writeUInt16BE(code, 0);
    body.write(reason, 2, 'utf8');
    this.socket.write(encodeFrame(Opcode.close, body));
    // A server that never answers the close is cut off.
    this.closeTimer = setTimeout(() => this.socket.destroy(), this.closeTimeoutMs);
    this.closeTimer.unref();
  }

  private received(chunk: Buffer) {
    if (this.done) return;
    let messages: Message[] = [];
    try {
      messages = this.decoder.push(chunk);
    } catch {
      // decoder.failure has it: refused below
    }
    for (const m of messages) {
      if (this.done) return;
      switch (m.type) {
        case 'ping':
          if (!this.closeSent) this.socket.write(encodeFrame(Opcode.pong, m.data));
          break;
        case 'pong': {
          const key = Buffer.from(m.data).toString('hex');
          const resolve = this.pings.get(key);
          if (resolve) {
            this.pings.delete(key);
            resolve();
          }
          break;
        }
        case 'close':
          // Echo the close (RFC 6455 5.5.1) unless this side started it, then end the TCP side.
          if (!this.closeSent) this.sendClose(m.code ?? CloseCode.normal, '');
          this.socket.end();
          this.finish(m.code, m.reason);
          return;
        default:
          if (!this.closeSent) this.handlers.message(m);
      }
    }
    const e = this.decoder.failure;
    if (e && !this.done) {
      // Refused: say why in the close frame, then stop reading; nothing more is believed.
      if (!this.closeSent) this.sendClose(e.closeCode, 'bad frame');
      this.socket.end();
      this.finish(e.closeCode, e.message, e);
    }
  }

  private finish(code: number | undefined, reason: string, error?: Error) {
    if (this.done) return;
    this.done = true;
    if (this.closeTimer) clearTimeout(this.closeTimer);
    this.socket.removeAllListeners('data');
    this.socket.on('error', () => {});
    if (error) this.socket.destroy();
    this.handlers.closed(code, reason, error);
    for (const resolve of this.finished.splice(0)) resolve();
  }
}

/**
 * Opens a WebSocket to `path` on the transport's daemon (its Unix socket, or TCP with the bearer
 * token). An answer other than 101 rejects with the API's CorralError (404, 400 not_a_terminal...).
 */
export function connectWebSocket(transport: Transport, path: string, handlers: WebSocketHandlers, options: WebSocketOptions = {}): Promise<WebSocketConnection> {
  const key = randomBytes(16).toString('base64');
  const headers: Record<string, string> = {
    Host: 'corral', Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': key,
  };
  if (transport.token !== undefined) headers['Authorization'] = `Bearer ${transport.token}`;
  const request: http.RequestOptions = { method: 'GET', path, headers, agent: false, ...transport.endpoint() };
  if (options.signal) request.signal = options.signal;
  return new Promise((resolve, reject) => {
    const req = http.request(request);
    req.on('upgrade', (res, socket, head) => {
      const expected = createHash('sha1').update(key + GUID).digest('base64');
      if (res.headers['sec-websocket-accept'] !== expected) {
        socket.destroy();
        return reject(new CorralError('bad_response', `${path}: the upgrade answer has a wrong Sec-WebSocket-Accept`, 101));
      }
      if (res.headers['sec-websocket-extensions'] || res.headers['sec-websocket-protocol']) {
        socket.destroy();
        return reject(new CorralError('bad_response', `${path}: the server chose an extension or subprotocol nobody asked for`, 101));
      }
      resolve(new WebSocketConnection(socket as Socket, head, handlers, options));
    });
    req.on('response', (res) => {
      readAll(res).then((body) => reject(errorFromBody(res.statusCode!, body.toString('utf8'))), reject);
    });
    req.on('error', (err) => {
      if (err.name === 'AbortError') return reject(err);
      reject(new CorralError('unreachable', `corrald at ${transport.where()}: ${err.message}`, 0));
    });
    req.end();
  });
}
