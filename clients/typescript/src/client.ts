// CorralClient: one method per corrald endpoint (docs/API.md, docs/openapi.yaml), typed.
import type { IncomingMessage } from 'node:http';
import { constants } from 'node:os';

import { abortError } from './errors.js';
import { parseNdjson, iterableToStream } from './ndjson.js';
import { Transport, readAll, toWebStream, type Body, type ConnectionOptions } from './transport.js';
import type {
  CodeRunEvent, ContextInfo, ContextRunResult, CreateSessionRequest, CreatedSession, EndSessionReport, FileEntry,
  Health, LogChunk, NetworkPolicy, PortLease, ProcessRecord, ProcessRequest, RunResult, SessionInfo,
  SessionSummary, ShellInfo, StreamEvent,
} from './types.js';
import { CorralSandbox } from './sandbox.js';
import { Terminal, type TerminalAttachOptions } from './terminal.js';

/** POST /v1/sessions/{sid}/terminals: the session's login shell unless `command` says otherwise. */
export type TerminalRequest = {
  command?: string; cwd?: string; env?: Record<string, string>; shell?: string; timeoutMs?: number;
  cols: number; rows: number;
};

const e = encodeURIComponent;

/** A streamed NDJSON answer: iterate its events, or take them as a web ReadableStream. */
export class EventStream<T> implements AsyncIterable<T> {
  private consumed = false;
  /** `signal`: the request's abort signal; reading after it fired rejects with its AbortError. */
  constructor(private readonly response: IncomingMessage, private readonly signal?: AbortSignal) {}

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.consumed) throw new Error('an EventStream can be read once');
    this.consumed = true;
    return this.events();
  }
  private async *events(): AsyncGenerator<T> {
    try {
      yield* parseNdjson<T>(this.response);
    } catch (err) {
      // An abort tears the connection down: report the abort, not the torn connection.
      if (this.signal?.aborted) throw abortError(this.signal);
      throw err;
    }
  }
  /** The events as a web ReadableStream of objects. */
  toReadableStream(): ReadableStream<T> {
    return iterableToStream(this, () => this.cancel());
  }
  /** The raw NDJSON bytes as a web ReadableStream. */
  toByteStream(): ReadableStream<Uint8Array> {
    this.consumed = true;
    return toWebStream(this.response);
  }
  /** Closes the connection (for `exec`, corrald then stops the command). */
  cancel(): void {
    this.response.destroy();
  }
}

export type ClientOptions = ConnectionOptions;

/** Streams of a process: both by default, or one; resumable from byte offsets. */
export type StreamOptions = {
  offset?: number; stdoutOffset?: number; stderrOffset?: number; stream?: 'stdout' | 'stderr';
  signal?: AbortSignal;
};

/** A client of one corrald. Every method maps to one HTTP endpoint; failures are CorralError. */
export class CorralClient {
  readonly transport: Transport;

  constructor(options: ClientOptions | Transport = {}) {
    this.transport = options instanceof Transport ? options : new Transport(options);
  }

  /** The same daemon with another token (for example a session's restricted token). */
  withToken(token: string | undefined): CorralClient {
    return new CorralClient(this.transport.withToken(token));
  }

  /** A Cloudflare-shaped view of session `id` (exec, startProcess, files, ports, ...). */
  sandbox(id: string): CorralSandbox {
    return new CorralSandbox(this, id);
  }

  /** Releases idle connections (the process can then exit). */
  close(): void {
    this.transport.close();
  }

  // ---- daemon
  health(): Promise<Health> { return this.transport.json('GET', '/v1/health'); }
  listPolicies(): Promise<{ presets: { name: string; source: string }[]; policies: unknown[] }> {
    return this.transport.json('GET', '/v1/policies');
  }
  validatePolicy(yaml: string): Promise<{ valid: boolean; name?: string; resolvedYaml?: string; diagnostics?: unknown[]; message?: string }> {
    return this.transport.json('POST', '/v1/policies/validate', { body: yaml, contentType: 'application/yaml' });
  }
  /** Prometheus text (GET /metrics). */
  async metrics(): Promise<string> {
    return (await readAll(await this.transport.request('GET', '/metrics'))).toString('utf8');
  }

  // ---- sessions
  createSession(request: CreateSessionRequest = {}, signal?: AbortSignal): Promise<CreatedSession> {
    return this.transport.json('POST', '/v1/sessions', { json: request, ...(signal ? { signal } : {}) });
  }
  async listSessions(): Promise<SessionSummary[]> {
    return (await this.transport.json<{ sessions: SessionSummary[] }>('GET', '/v1/sessions')).sessions;
  }
  getSession(sid: string): Promise<SessionInfo> { return this.transport.json('GET', `/v1/sessions/${e(sid)}`); }
  /** Ends the session: its whole process tree is killed, its ports released. */
  endSession(sid: string): Promise<EndSessionReport> { return this.transport.json('DELETE', `/v1/sessions/${e(sid)}`); }
  /** Sets and unsets session environment variables; answers the resulting env. */
  async patchEnv(sid: string, patch: { set?: Record<string, string>; unset?: string[] }): Promise<Record<string, string>> {
    return (await this.transport.json<{ env: Record<string, string> }>('PATCH', `/v1/sessions/${e(sid)}/env`, { json: patch })).env;
  }
  /** Changes the egress policy (PATCH /v1/sessions/{sid}/network). */
  setNetworkPolicy(sid: string, policy: NetworkPolicy): Promise<unknown> {
    return this.transport.json('PATCH', `/v1/sessions/${e(sid)}/network`, { json: policy });
  }

  // ---- processes
  /** Runs a command to its end; the answer carries its output. */
  run(sid: string, request: ProcessRequest, signal?: AbortSignal): Promise<RunResult> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/run`, { json: request, ...(signal ? { signal } : {}) });
  }
  /** Runs a command, streaming start/stdout/stderr/exit events. Closing the stream stops it. */
  async exec(sid: string, request: ProcessRequest, signal?: AbortSignal): Promise<EventStream<StreamEvent>> {
    const response = await this.transport.request('POST', `/v1/sessions/${e(sid)}/exec`, { json: request, ...(signal ? { signal } : {}) });
    return new EventStream<StreamEvent>(response, signal);
  }
  /** Starts a background process. */
  spawn(sid: string, request: ProcessRequest): Promise<ProcessRecord> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/processes`, { json: request });
  }
  async listProcesses(sid: string): Promise<ProcessRecord[]> {
    return (await this.transport.json<{ processes: ProcessRecord[] }>('GET', `/v1/sessions/${e(sid)}/processes`)).processes;
  }
  getProcess(sid: string, proc: string): Promise<ProcessRecord> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/processes/${e(proc)}`);
  }
  /** Sends a signal (name or number); `tree` signals every process of its leaf. */
  signalProcess(sid: string, proc: string, signal: string | number, options: { tree?: boolean } = {}): Promise<{ id: string; signal: string }> {
    const body: Record<string, unknown> = { signal };
    if (options.tree !== undefined) body.tree = options.tree;
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/processes/${e(proc)}/signal`, { json: body });
  }
  /** Stops a process and its descendants; answers the final record with `killed`. */
  killProcess(sid: string, proc: string, options: { force?: boolean } = {}): Promise<ProcessRecord & { killed: number }> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/processes/${e(proc)}`,
      { query: { force: options.force ? 'true' : undefined } });
  }
  /** Kills every running process of the session (DELETE /v1/sessions/{sid}/processes). */
  killAllProcesses(sid: string): Promise<{ killed: number }> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/processes`);
  }
  logs(sid: string, proc: string, options: { stream?: 'stdout' | 'stderr'; offset?: number; limit?: number } = {}): Promise<LogChunk> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/processes/${e(proc)}/logs`, { query: options });
  }
  /** Streams a process's output, resumable from offsets, until it exits. */
  async streamProcess(sid: string, proc: string, options: StreamOptions = {}): Promise<EventStream<StreamEvent>> {
    const { signal, ...query } = options;
    const response = await this.transport.request('GET', `/v1/sessions/${e(sid)}/processes/${e(proc)}/stream`,
      { query, ...(signal ? { signal } : {}) });
    return new EventStream<StreamEvent>(response, signal);
  }
  writeStdin(sid: string, proc: string, data: Body, options: { eof?: boolean } = {}): Promise<{ written: number; eof: boolean }> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/processes/${e(proc)}/stdin`,
      { body: data, contentType: 'application/octet-stream', query: { eof: options.eof ? 'true' : undefined } });
  }
  /** Waits for a process to end (or `timeoutMs`); `finished` says which. */
  waitProcess(sid: string, proc: string, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<ProcessRecord & { finished: boolean }> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/processes/${e(proc)}/wait`,
      { query: { timeoutMs: options.timeoutMs }, ...(options.signal ? { signal: options.signal } : {}) });
  }

  // ---- terminals
  /** Starts a process on a PTY (POST /v1/sessions/{sid}/terminals). */
  createTerminal(sid: string, request: TerminalRequest): Promise<ProcessRecord> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/terminals`, { json: request });
  }
  /** Attaches to terminal `proc` over its WebSocket: the scrollback arrives first, then live bytes. */
  attachTerminal(sid: string, proc: string, options: TerminalAttachOptions = {}): Promise<Terminal> {
    return Terminal.attach(this.transport, sid, proc, options);
  }
  /** Starts a process on a PTY and attaches to it. */
  async openTerminal(sid: string, request: TerminalRequest, options: TerminalAttachOptions = {}): Promise<Terminal> {
    const record = await this.createTerminal(sid, request);
    return Terminal.attach(this.transport, sid, record.id, options, record);
  }

  // ---- files
  /** A file's bytes as a stream (404 `not_found` when it does not exist). */
  async readFile(sid: string, path: string, signal?: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const response = await this.transport.request('GET', `/v1/sessions/${e(sid)}/files`, { query: { path }, ...(signal ? { signal } : {}) });
    return toWebStream(response);
  }
  /** A file's bytes. */
  async readFileBytes(sid: string, path: string, signal?: AbortSignal): Promise<Uint8Array> {
    const response = await this.transport.request('GET', `/v1/sessions/${e(sid)}/files`, { query: { path }, ...(signal ? { signal } : {}) });
    return new Uint8Array(await readAll(response));
  }
  /** Writes a file (parent directories are created); the body may be a stream. */
  writeFile(sid: string, path: string, content: Body, signal?: AbortSignal): Promise<{ path: string; size: number }> {
    return this.transport.json('PUT', `/v1/sessions/${e(sid)}/files`,
      { query: { path }, body: content, contentType: 'application/octet-stream', ...(signal ? { signal } : {}) });
  }
  deleteFile(sid: string, path: string, options: { recursive?: boolean } = {}): Promise<{ path: string; deleted: boolean }> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/files`, { query: { path, recursive: options.recursive ? 'true' : undefined } });
  }
  mkdir(sid: string, path: string, options: { recursive?: boolean } = {}): Promise<{ path: string; created: boolean }> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/files/mkdir`, { json: { path, recursive: options.recursive ?? false } });
  }
  move(sid: string, from: string, to: string, options: { replace?: boolean } = {}): Promise<{ from: string; to: string }> {
    const body: Record<string, unknown> = { from, to };
    if (options.replace !== undefined) body.replace = options.replace;
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/files/move`, { json: body });
  }
  async listFiles(sid: string, path: string, options: { recursive?: boolean } = {}): Promise<FileEntry[]> {
    return (await this.listDirectory(sid, path, options)).entries;
  }
  /** The whole listing: `path` is the directory as corrald resolved it (absolute), `truncated` past 100000 entries. */
  listDirectory(sid: string, path: string, options: { recursive?: boolean } = {}): Promise<{ path: string; entries: FileEntry[]; truncated?: boolean }> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/files/list`,
      { query: { path, recursive: options.recursive ? 'true' : undefined } });
  }
  stat(sid: string, path: string): Promise<FileEntry & { path: string }> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/files/stat`, { query: { path } });
  }
  /** Streams file events (create/modify/delete/move) under a path. */
  async watch(sid: string, path: string, options: { recursive?: boolean; signal?: AbortSignal } = {}): Promise<EventStream<Record<string, unknown>>> {
    const response = await this.transport.request('GET', `/v1/sessions/${e(sid)}/files/watch`,
      { query: { path, recursive: options.recursive ? 'true' : undefined }, ...(options.signal ? { signal: options.signal } : {}) });
    return new EventStream(response, options.signal);
  }
  /** Clones a repository inside the session (POST /v1/sessions/{sid}/git/checkout). */
  gitCheckout(sid: string, request: { url: string; branch?: string; targetDir?: string; depth?: number; timeoutMs?: number }): Promise<Record<string, unknown>> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/git/checkout`, { json: request });
  }

  // ---- ports
  /** Leases one host port from the daemon's pool. */
  leasePort(sid: string): Promise<PortLease> { return this.transport.json('POST', `/v1/sessions/${e(sid)}/ports`, { json: {} }); }
  async listPorts(sid: string): Promise<PortLease[]> {
    return (await this.transport.json<{ ports: PortLease[] }>('GET', `/v1/sessions/${e(sid)}/ports`)).ports;
  }
  releasePort(sid: string, port: number): Promise<{ released: number }> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/ports/${port}`);
  }
  portEndpoint(sid: string, port: number, protocol: string = 'http'): Promise<{ port: number; protocol: string; url: string }> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/ports/${port}/endpoint`, { query: { protocol } });
  }
  /** Resolves once something inside accepts connections on the port (504 `timeout` otherwise). */
  waitPort(sid: string, port: number, options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<{ port: number; ready: boolean }> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/ports/${port}/wait`,
      { query: { timeoutMs: options.timeoutMs }, ...(options.signal ? { signal: options.signal } : {}) });
  }

  // ---- shell contexts
  createShell(sid: string, request: { id?: string; cwd?: string; env?: Record<string, string> } = {}): Promise<ShellInfo> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/shells`, { json: request });
  }
  async listShells(sid: string): Promise<ShellInfo[]> {
    const reply = await this.transport.json<{ shells: ShellInfo[] }>('GET', `/v1/sessions/${e(sid)}/shells`);
    return reply.shells;
  }
  getShell(sid: string, shell: string): Promise<ShellInfo> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/shells/${e(shell)}`);
  }
  deleteShell(sid: string, shell: string): Promise<unknown> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/shells/${e(shell)}`);
  }

  // ---- code contexts
  /** Starts a python or javascript interpreter in the session; answers once it is ready. */
  createContext(sid: string, request: { language: string; id?: string; cwd?: string; env?: Record<string, string> }, signal?: AbortSignal): Promise<ContextInfo> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/contexts`, { json: request, ...(signal ? { signal } : {}) });
  }
  async listContexts(sid: string): Promise<ContextInfo[]> {
    return (await this.transport.json<{ contexts: ContextInfo[] }>('GET', `/v1/sessions/${e(sid)}/contexts`)).contexts;
  }
  getContext(sid: string, ctx: string): Promise<ContextInfo> {
    return this.transport.json('GET', `/v1/sessions/${e(sid)}/contexts/${e(ctx)}`);
  }
  deleteContext(sid: string, ctx: string): Promise<unknown> {
    return this.transport.json('DELETE', `/v1/sessions/${e(sid)}/contexts/${e(ctx)}`);
  }
  /** Runs code in a context (state persists across runs). */
  runCode(sid: string, ctx: string, request: { code: string; timeoutMs?: number }, signal?: AbortSignal): Promise<ContextRunResult> {
    return this.transport.json('POST', `/v1/sessions/${e(sid)}/contexts/${e(ctx)}/run`, { json: request, ...(signal ? { signal } : {}) });
  }
  /** Runs code in a context, streaming its stdout/stderr/result/error/end events. */
  async runCodeStream(sid: string, ctx: string, request: { code: string; timeoutMs?: number }, signal?: AbortSignal): Promise<EventStream<CodeRunEvent>> {
    const response = await this.transport.request('POST', `/v1/sessions/${e(sid)}/contexts/${e(ctx)}/run`,
      { json: request, headers: { Accept: 'application/x-ndjson' }, ...(signal ? { signal } : {}) });
    return new EventStream<CodeRunEvent>(response, signal);
  }
}

/**
 * A final record's exit code as a shell reports it: `exitCode`, or 128+N when the record names
 * signal N but carries no code; -1 for a record that has neither (a process that never ran).
 */
export function shellExitCode(record: { exitCode: number | null; signal: string | null }): number {
  if (record.exitCode !== null && record.exitCode !== undefined) return record.exitCode;
  if (record.signal) {
    const name = (record.signal.startsWith('SIG') ? record.signal : 'SIG' + record.signal) as keyof typeof constants.signals;
    const number = constants.signals[name];
    if (number !== undefined) return 128 + number;
  }
  return -1;
}

/** Decodes an output event's or a result's bytes (`data` or `dataBase64`). */
export function eventBytes(event: { data?: string; dataBase64?: string }): Uint8Array {
  if (event.dataBase64 !== undefined) return new Uint8Array(Buffer.from(event.dataBase64, 'base64'));
  return new TextEncoder().encode(event.data ?? '');
}
