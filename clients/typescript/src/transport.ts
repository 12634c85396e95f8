// HTTP/1.1 to corrald over its Unix socket (node:http's socketPath, as `curl --unix-socket`) or
// over loopback TCP with a bearer token. Only node: modules: the package has no runtime dependency.
import * as http from 'node:http';
import { Readable } from 'node:stream';
import type { ReadableStream as NodeReadableStream } from 'node:stream/web';

import { CorralError, errorFromBody } from './errors.js';

/** Where corrald listens and with which rights to talk to it. */
export type ConnectionOptions = {
  /** corrald's Unix socket (default: $CORRAL_SOCKET, else /run/corral/corrald.sock). */
  socketPath?: string;
  /** A TCP base URL (`http://127.0.0.1:7777`); every TCP request needs a token. */
  url?: string;
  /** A session's full or restricted token, sent as `Authorization: Bearer`. */
  token?: string;
};

/** A request body: text, bytes, or a stream of bytes sent chunked. */
export type Body = string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export type RequestOptions = {
  query?: Record<string, string | number | boolean | undefined>;
  /** A JSON body (serialised) — or use `body` for raw bytes. */
  json?: unknown;
  body?: Body;
  contentType?: string;
  signal?: AbortSignal;
  /** Extra request headers (Accept, ...). */
  headers?: Record<string, string>;
};

/** Sends requests to one corrald with one set of credentials. */
export class Transport {
  readonly socketPath?: string;
  readonly url?: URL;
  readonly token?: string;
  private readonly agent: http.Agent;

  constructor(options: ConnectionOptions = {}) {
    if (options.url) {
      this.url = new URL(options.url);
      if (this.url.protocol !== 'http:')
        throw new CorralError('invalid', `url \`${options.url}\`: only http: is served by corrald`, 0);
    } else {
      this.socketPath = options.socketPath ?? process.env.CORRAL_SOCKET ?? '/run/corral/corrald.sock';
    }
    if (options.token !== undefined) this.token = options.token;
    this.agent = new http.Agent({ keepAlive: true });
  }

  /** The same daemon with another token (a session's restricted token, say). */
  withToken(token: string | undefined): Transport {
    const options: ConnectionOptions = {};
    if (this.url) options.url = this.url.toString();
    else if (this.socketPath) options.socketPath = this.socketPath;
    if (token !== undefined) options.token = token;
    return new Transport(options);
  }

  /** Sends a request; resolves with the response once its headers arrived and its status is 2xx. */
  async request(method: string, path: string, options: RequestOptions = {}): Promise<http.IncomingMessage> {
    const target = path + queryString(options.query);
    const headers: Record<string, string> = { Host: 'corral' };
    if (this.token !== undefined) headers['Authorization'] = `Bearer ${this.token}`;
    if (options.headers) Object.assign(headers, options.headers);
    let body = options.body;
    if (options.json !== undefined) {
      body = JSON.stringify(options.json);
      headers['Content-Type'] = 'application/json';
    } else if (options.contentType) {
      headers['Content-Type'] = options.contentType;
    }
    const request: http.RequestOptions = { method, path: target, headers, agent: this.agent, ...this.endpoint() };
    if (options.signal) request.signal = options.signal;
    if (typeof body === 'string' || body instanceof Uint8Array)
      headers['Content-Length'] = String(Buffer.byteLength(body));
    else if (method !== 'GET' && method !== 'HEAD' && body === undefined) headers['Content-Length'] = '0';

    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      let answered = false;
      let failure: Error | undefined;
      const req = http.request(request, (res) => {
        answered = true;
        resolve(res);
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (err.name === 'AbortError') return reject(err);
        failure = new CorralError('unreachable', `corrald at ${this.where()}: ${err.message}`, 0);
        // corrald may answer (an error, before reading the body) and close while the body is
        // still being sent: that answer still arrives, so wait for the socket to close.
        if (err.code !== 'EPIPE' && err.code !== 'ECONNRESET') reject(failure);
      });
      req.on('close', () => {
        if (!answered) reject(failure ?? new CorralError('unreachable', `corrald at ${this.where()} closed the connection`, 0));
      });
      if (body === undefined) req.end();
      else if (typeof body === 'string' || body instanceof Uint8Array) req.end(body);
      else pipeBody(body, req).catch((err) => req.destroy(err as Error));
    });
    if (response.statusCode! >= 200 && response.statusCode! < 300) return response;
    const text = await readAll(response);
    throw errorFromBody(response.statusCode!, text.toString('utf8'));
  }

  /** A request whose 2xx answer is JSON. */
  async json<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const response = await this.request(method, path, options);
    const text = (await readAll(response)).toString('utf8');
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new CorralError('bad_response', `${method} ${path}: answer is not JSON: ${text.slice(0, 200)}`, response.statusCode!);
    }
  }

  /** Releases idle keep-alive connections. */
  close(): void {
    this.agent.destroy();
  }

  /** Where requests go, as node:http request options: the TCP host and port, or the socket path. */
  endpoint(): Pick<http.RequestOptions, 'host' | 'port' | 'socketPath'> {
    if (this.url) return { host: this.url.hostname, port: this.url.port || 80 };
    return { socketPath: this.socketPath! };
  }

  /** The daemon's address, for messages. */
  where(): string {
    return this.url ? this.url.toString() : `unix:${this.socketPath}`;
  }
}

function queryString(query: RequestOptions['query']): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) params.set(k, String(v));
  const text = params.toString();
  return text ? '?' + text : '';
}

async function pipeBody(body: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>, req: http.ClientRequest) {
  const source: AsyncIterable<Uint8Array> =
    Symbol.asyncIterator in body ? (body as AsyncIterable<Uint8Array>) : Readable.fromWeb(body as NodeReadableStream<Uint8Array>);
  for await (const chunk of source) {
    if (!req.write(chunk)) await new Promise((r) => req.once('drain', r));
  }
  req.end();
}

/** Reads a whole response body. */
export async function readAll(stream: AsyncIterable<Buffer | Uint8Array>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** A Node readable (a response body) as a web ReadableStream of bytes. */
export function toWebStream(readable: Readable): ReadableStream<Uint8Array> {
  return Readable.toWeb(readable) as unknown as ReadableStream<Uint8Array>;
}
