// The AI SDK harness sandbox provider (HarnessV1SandboxProvider from @ai-sdk/harness) over corrald.
// The shapes below are structural copies of the published interfaces, so the package's own
// declarations need no AI SDK package; typecheck/ai-sdk.ts asserts they satisfy the real ones.
import { createHash } from 'node:crypto';

import { CorralClient, eventBytes, shellExitCode, type ClientOptions } from './client.js';
import { CorralError, abortError, throwIfSetupFailed } from './errors.js';
import type { CreateSessionRequest, ExitStatus, NetworkPolicy, SessionInfo, StreamEvent } from './types.js';

/** Options of run/spawn (the AI SDK's SandboxProcessOptions). */
export type SandboxProcessOptions = {
  command: string;
  workingDirectory?: string;
  env?: Record<string, string>;
  abortSignal?: AbortSignal;
};
export type ReadFileOptions = { path: string; abortSignal?: AbortSignal };
export type WriteFileOptions<CONTENT> = { path: string; content: CONTENT; abortSignal?: AbortSignal };

/** A process started by `spawn` (the AI SDK's SandboxProcess). */
export type CorralSandboxProcess = {
  /** The process's pid on the host. */
  readonly pid?: number;
  /** corrald's process id (`p1`, ...). */
  readonly id: string;
  readonly stdout: ReadableStream<Uint8Array>;
  readonly stderr: ReadableStream<Uint8Array>;
  /**
   * Resolves with the exit code (128+N for signal N) and corral's exit status (`timeout`, `oom`,
   * `killed`, ...); rejects with the abort reason if aborted.
   */
  wait(): Promise<ProcessExit>;
  /**
   * Bytes of output the stream never delivered: written before it attached and already out of the
   * policy's `limits.output` window (corrald's `skipped`). Each gap also gets a note on stderr.
   */
  readonly skipped: { stdout: number; stderr: number };
  /** Stops the process and its descendants. Idempotent. */
  kill(): Promise<void>;
};

/** Options of the provider: where corrald is and how sessions are made. */
export type CorralSandboxProviderOptions = ClientOptions & {
  /** An existing client (instead of socketPath/url/token). */
  client?: CorralClient;
  /** Named policy or preset for new sessions (default: corrald's `default`). */
  policy?: string;
  /** An inline policy instead of `policy`. */
  policyYaml?: string;
  env?: Record<string, string>;
  cwd?: string;
  commandTimeoutMs?: number;
};

/** How a process ended: the AI SDK's `{exitCode}` and corral's exit status beside it. */
export type ProcessExit = { exitCode: number; status: ExitStatus };
/** The result of `run`: the AI SDK's fields and corral's exit status. */
export type RunOutput = { exitCode: number; stdout: string; stderr: string; status: ExitStatus };

const encoder = new TextEncoder();

/** The reduced session (file I/O, run, spawn): what `restricted()` hands to tools. */
export class CorralSandboxSession {
  readonly id: string;
  protected readonly client: CorralClient;
  protected info: SessionInfo;

  constructor(client: CorralClient, info: SessionInfo) {
    this.client = client;
    this.id = info.id;
    this.info = info;
  }

  /** What an agent should know about this sandbox. */
  get description(): string {
    const ports = this.info.ports.map((p) => p.port);
    return [
      `A corral sandbox session (\`${this.id}\`, policy \`${this.info.policy}\`) on Linux.`,
      `Commands run through a shell in ${this.info.cwd || '/workspace'} unless told otherwise; ` +
        `each runs in the session's cgroup, and ending the session kills everything it started.`,
      ports.length ? `Leased ports (listen on these to be reachable): ${ports.join(', ')}.` : 'No ports are leased.',
    ].join('\n');
  }

  readonly readFile = async (options: ReadFileOptions): Promise<ReadableStream<Uint8Array> | null> =>
    nullIfMissing(() => this.client.readFile(this.id, options.path, options.abortSignal));

  readonly readBinaryFile = async (options: ReadFileOptions): Promise<Uint8Array | null> =>
    nullIfMissing(() => this.client.readFileBytes(this.id, options.path, options.abortSignal));

  readonly readTextFile = async (
    options: ReadFileOptions & { encoding?: string; startLine?: number; endLine?: number },
  ): Promise<string | null> => {
    const bytes = await this.readBinaryFile(options);
    if (bytes === null) return null;
    const text = new TextDecoder(options.encoding ?? 'utf-8').decode(bytes);
    return sliceLines(text, options.startLine, options.endLine);
  };

  readonly writeFile = async (options: WriteFileOptions<ReadableStream<Uint8Array>>): Promise<void> => {
    await this.client.writeFile(this.id, options.path, options.content, options.abortSignal);
  };

  readonly writeBinaryFile = async (options: WriteFileOptions<Uint8Array>): Promise<void> => {
    await this.client.writeFile(this.id, options.path, options.content, options.abortSignal);
  };

  readonly writeTextFile = async (options: WriteFileOptions<string> & { encoding?: string }): Promise<void> => {
    await this.client.writeFile(this.id, options.path, encodeText(options.content, options.encoding), options.abortSignal);
  };

  /** Starts a command; its output streams while it runs. */
  readonly spawn = (options: SandboxProcessOptions): Promise<CorralSandboxProcess> => spawnProcess(this.client, this.id, options);

  /**
   * Runs a command to its end and collects its output. A command that could not start (a missing
   * `workingDirectory`, ...) rejects with ProcessSetupError carrying corrald's reason; one stopped
   * at its timeout has `status: 'timeout'` and a note at the end of stderr.
   */
  readonly run = async (options: SandboxProcessOptions): Promise<RunOutput> => {
    const proc = await spawnProcess(this.client, this.id, options, true);
    const [stdout, stderr, result] = await Promise.all([
      new Response(proc.stdout).text(),
      new Response(proc.stderr).text(),
      proc.wait(),
    ]);
    return { exitCode: result.exitCode, stdout, stderr, status: result.status };
  };
}

/** The full session: lifecycle, ports and network on top of the reduced one. */
export class CorralNetworkSandboxSession extends CorralSandboxSession {
  private readonly restrictedToken: string | undefined;

  constructor(client: CorralClient, info: SessionInfo, restrictedToken?: string) {
    super(client, info);
    this.restrictedToken = restrictedToken;
  }

  /** The sandbox's working directory (where relative paths and commands start). */
  get defaultWorkingDirectory(): string {
    return this.info.cwd || '/workspace';
  }

  /** Ports leased to this session, as last seen by this object. */
  get ports(): ReadonlyArray<number> {
    return this.info.ports.map((p) => p.port);
  }

  /**
   * The URL of a leased port. corrald forwards the port as plain TCP, so `https` is the `http`
   * endpoint with the https scheme: TLS, if any, is the sandboxed server's own.
   */
  readonly getPortEndpoint = async (options: { port: number; protocol?: 'http' | 'https' | 'ws' }): Promise<{ url: string }> => {
    const protocol = options.protocol ?? 'http';
    const reply = await this.client.portEndpoint(this.id, options.port, protocol === 'https' ? 'http' : protocol);
    return { url: protocol === 'https' ? reply.url.replace(/^http:/, 'https:') : reply.url };
  };

  /** @deprecated as in the AI SDK: use getPortEndpoint. */
  readonly getPortUrl = async (options: { port: number; protocol?: 'http' | 'https' | 'ws' }): Promise<string> =>
    (await this.getPortEndpoint(options)).url;

  /** Ends the session (kills its whole tree, releases its ports). Idempotent. */
  readonly stop = async (): Promise<void> => {
    try {
      await this.client.endSession(this.id);
    } catch (err) {
      if (!(err instanceof CorralError && err.code === 'no_such_session')) throw err;
    }
  };

  /** corrald removes everything of a session when it ends: destroy is stop. */
  readonly destroy = (): Promise<void> => this.stop();

  /** Changes the session's egress policy (PATCH /v1/sessions/{sid}/network). */
  readonly setNetworkPolicy = async (policy: NetworkPolicy): Promise<void> => {
    await this.client.setNetworkPolicy(this.id, policy);
  };

  /**
   * Makes the leased ports exactly `ports`: leases that are not listed are released. corral leases
   * ports from its own pool (no two sessions get the same one), so a port it did not lease cannot be
   * asked for by number: that is a CorralError `port_not_leased` naming the ports it leased.
   */
  readonly setPorts = async (ports: ReadonlyArray<number>, options: { abortSignal?: AbortSignal } = {}): Promise<void> => {
    const leased = await this.client.listPorts(this.id);
    const missing = ports.filter((p) => !leased.some((l) => l.port === p));
    if (missing.length)
      throw new CorralError('port_not_leased',
        `port(s) ${missing.join(', ')} are not leased to session \`${this.id}\` (leased: ${leased.map((l) => l.port).join(', ') || 'none'}); ` +
          'corral hands out ports from its pool: lease one (CorralClient.leasePort) and listen on it', 409);
    for (const lease of leased) {
      if (options.abortSignal?.aborted) throw abortError(options.abortSignal);
      if (!ports.includes(lease.port)) await this.client.releasePort(this.id, lease.port);
    }
    await this.refresh();
  };

  /**
   * The reduced view: run, spawn and files only, through the session's restricted token. Without
   * one (a session resumed without `restrictedToken`: corrald hands tokens out only at creation)
   * it throws CorralError `no_token` rather than hand out this client's rights.
   */
  readonly restricted = (): CorralSandboxSession => {
    if (!this.restrictedToken)
      throw new CorralError('no_token',
        `session \`${this.id}\` has no restricted token here: corrald gives it out only when the session is created; ` +
          'resume it with resumeSession({ sessionId, restrictedToken }) or from the provider that created it', 0);
    return new CorralSandboxSession(this.client.withToken(this.restrictedToken), this.info);
  };

  /** Re-reads the session record (ports, cwd). */
  async refresh(): Promise<void> {
    this.info = await this.client.getSession(this.id);
  }
}

/** A HarnessV1SandboxProvider whose sessions are corral sessions. */
export type CorralSandboxProvider = {
  readonly specificationVersion: 'harness-sandbox-v1';
  readonly providerId: 'corral';
  readonly client: CorralClient;
  readonly createSession: (options?: {
    sessionId?: string;
    abortSignal?: AbortSignal;
    identity?: string;
    onFirstCreate?: (session: CorralSandboxSession, opts: { abortSignal?: AbortSignal }) => Promise<void>;
  }) => Promise<CorralNetworkSandboxSession>;
  /**
   * Reattaches to the session `createSession` made for `sessionId`. `restrictedToken` (the one
   * corrald answered at creation) makes `restricted()` work after a resume in another process;
   * this provider remembers the tokens of the sessions it created itself.
   */
  readonly resumeSession: (options: { sessionId: string; abortSignal?: AbortSignal; restrictedToken?: string }) => Promise<CorralNetworkSandboxSession>;
};

/**
 * corral's session id for the AI SDK's `sessionId`, which is opaque: an id corrald takes
 * (1-64 of A-Z a-z 0-9 - _) is used as it is; any other becomes its first characters made valid,
 * `-` and 40 hex digits of its SHA-256, so createSession and resumeSession find the same session.
 */
export function corralSessionId(sessionId: string): string {
  if (/^[A-Za-z0-9_-]{1,64}$/.test(sessionId)) return sessionId;
  const readable = sessionId.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 23) || 's';
  return `${readable}-${createHash('sha256').update(sessionId, 'utf8').digest('hex').slice(0, 40)}`;
}

/** Creates the provider. No I/O happens until createSession/resumeSession. */
export function createCorralSandboxProvider(options: CorralSandboxProviderOptions = {}): CorralSandboxProvider {
  const { client: given, policy, policyYaml, env, cwd, commandTimeoutMs, ...connection } = options;
  const client = given ?? new CorralClient(connection);
  const restrictedTokens = new Map<string, string>();  // of the sessions this provider created
  return {
    specificationVersion: 'harness-sandbox-v1',
    providerId: 'corral',
    client,
    createSession: async (create = {}) => {
      const signal = create.abortSignal;
      if (signal?.aborted) throw abortError(signal);
      const request: CreateSessionRequest = {};
      if (policyYaml !== undefined) request.policyYaml = policyYaml;
      else if (policy !== undefined) request.policy = policy;
      if (create.sessionId !== undefined) request.id = corralSessionId(create.sessionId);
      if (env !== undefined) request.env = env;
      if (cwd !== undefined) request.cwd = cwd;
      if (commandTimeoutMs !== undefined) request.commandTimeoutMs = commandTimeoutMs;
      const created = await client.createSession(request);
      const { token: _full, restrictedToken, ...info } = created;
      restrictedTokens.set(info.id, restrictedToken);
      const session = new CorralNetworkSandboxSession(client, info, restrictedToken);
      try {
        if (signal?.aborted) throw abortError(signal);
        if (create.onFirstCreate) await create.onFirstCreate(session, signal ? { abortSignal: signal } : {});
      } catch (err) {
        await session.destroy().catch(() => undefined);
        throw err;
      }
      return session;
    },
    resumeSession: async ({ sessionId, abortSignal, restrictedToken }) => {
      if (abortSignal?.aborted) throw abortError(abortSignal);
      const id = corralSessionId(sessionId);
      const info = await client.getSession(id);
      if (info.state !== 'active')
        throw new CorralError('session_ended', `session \`${id}\` is ${info.state}`, 409);
      return new CorralNetworkSandboxSession(client, info, restrictedToken ?? restrictedTokens.get(id));
    },
  };
}

/** Starts `command` as a background process and turns its output stream into web streams. */
async function spawnProcess(
  client: CorralClient, sid: string, options: SandboxProcessOptions, foreground = false,
): Promise<CorralSandboxProcess> {
  const signal = options.abortSignal;
  if (signal?.aborted) throw abortError(signal);
  const request: { command: string; cwd?: string; env?: Record<string, string> } = { command: options.command };
  if (options.workingDirectory !== undefined) request.cwd = options.workingDirectory;
  if (options.env !== undefined) request.env = options.env;
  let id: string, pid: number;
  let events: AsyncIterator<StreamEvent>;
  if (foreground) {
    // run: an exec stream, so the command stops if this client goes away mid-run.
    events = (await client.exec(sid, request))[Symbol.asyncIterator]();
    const first = await events.next();
    if (first.done || first.value.type !== 'start') {
      const ev = first.done ? undefined : first.value;
      throw ev && ev.type === 'error'
        ? new CorralError(ev.code, ev.message, 0)
        : new CorralError('bad_response', 'exec stream did not begin with a start event', 0);
    }
    ({ id, pid } = first.value);
  } else {
    // spawn: a background process (POST .../processes) followed through its output stream; it
    // outlives this client's connection, as a spawned long-running process should.
    const record = await client.spawn(sid, request);
    throwIfSetupFailed(record, options.command);
    ({ id, pid } = record);
    try {
      events = (await client.streamProcess(sid, id))[Symbol.asyncIterator]();
    } catch (err) {
      await client.killProcess(sid, id).catch(() => undefined);
      throw err;
    }
  }

  let out!: ReadableStreamDefaultController<Uint8Array>;
  let err!: ReadableStreamDefaultController<Uint8Array>;
  const stdout = new ReadableStream<Uint8Array>({ start: (c) => void (out = c) });
  const stderr = new ReadableStream<Uint8Array>({ start: (c) => void (err = c) });
  const closeStreams = () => {
    for (const c of [out, err]) try { c.close(); } catch { /* cancelled by the reader */ }
  };
  const enqueue = (c: ReadableStreamDefaultController<Uint8Array>, bytes: Uint8Array) => {
    try { c.enqueue(bytes); } catch { /* the reader cancelled this stream */ }
  };

  const skipped = { stdout: 0, stderr: 0 };
  const note = (text: string) => enqueue(err, encoder.encode(text));
  let exited = false;
  const exit = (async (): Promise<ProcessExit> => {
    try {
      for (;;) {
        const next = await events.next();
        if (next.done) throw new CorralError('stream_ended', `output stream of \`${id}\` ended without a final event`, 0);
        const ev: StreamEvent = next.value;
        if (ev.type === 'start') continue;
        if (ev.type === 'stdout' || ev.type === 'stderr') {
          // Output written before this stream attached fell out of the policy's output window:
          // the gap is said on stderr (and counted), never passed over in silence.
          if (ev.skipped) {
            skipped[ev.type] += ev.skipped;
            note(`[corral: ${ev.skipped} bytes of ${ev.type} were lost before this stream attached (beyond the policy's limits.output)]\n`);
          }
          enqueue(ev.type === 'stdout' ? out : err, eventBytes(ev));
        } else if (ev.type === 'exit') {
          throwIfSetupFailed(ev, options.command);
          if (ev.status === 'timeout')
            note(`[corral: timed out${ev.timeoutMs !== undefined ? ` after ${ev.timeoutMs} ms` : ''} and stopped${ev.signal ? ` with ${ev.signal}` : ''}]\n`);
          return { exitCode: shellExitCode(ev), status: ev.status };
        } else if (ev.type === 'error') throw new CorralError(ev.code, ev.message, 0);
      }
    } finally {
      exited = true;
      closeStreams();
    }
  })();

  let killing: Promise<void> | undefined;
  const kill = (): Promise<void> => {
    killing ??= (async () => {
      if (exited) return;
      try {
        await client.killProcess(sid, id);
      } catch (e) {
        // Already gone (ended meanwhile, or its session ended): kill is idempotent.
        if (!(e instanceof CorralError && (e.status === 404 || e.status === 409))) throw e;
      }
      await exit.catch(() => undefined);
    })();
    return killing;
  };

  let waited: Promise<ProcessExit> = exit;
  if (signal) {
    const aborted = new Promise<never>((_, reject) => {
      const onAbort = () => {
        void kill().catch(() => undefined);
        reject(abortError(signal));
      };
      // The signal may have fired while the process was starting: it is killed all the same.
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      void exit.finally(() => signal.removeEventListener('abort', onAbort)).catch(() => undefined);
    });
    waited = Promise.race([exit, aborted]);
  }
  waited.catch(() => undefined);  // a caller that never waits must not crash the process
  return { pid, id, stdout, stderr, wait: () => waited, kill, skipped };
}

function nullIfMissing<T>(read: () => Promise<T>): Promise<T | null> {
  return read().catch((err) => {
    if (err instanceof CorralError && err.code === 'not_found') return null;
    throw err;
  });
}

/** Lines startLine..endLine (1-based, inclusive; past EOF reads to EOF), line endings kept. */
export function sliceLines(text: string, startLine?: number, endLine?: number): string {
  if (startLine === undefined && endLine === undefined) return text;
  const start = startLine ?? 1;
  if (!Number.isInteger(start) || start < 1)
    throw new CorralError('invalid', `startLine ${startLine} must be an integer >= 1`, 0);
  if (endLine !== undefined && (!Number.isInteger(endLine) || endLine < start))
    throw new CorralError('invalid', `endLine ${endLine} must be an integer >= startLine (${start})`, 0);
  const lines = text.split(/(?<=\n)/);
  return lines.slice(start - 1, endLine).join('');
}

function encodeText(text: string, encoding = 'utf-8'): Uint8Array {
  const name = encoding.toLowerCase();
  if (name === 'utf-8' || name === 'utf8') return encoder.encode(text);
  if (!Buffer.isEncoding(name)) throw new CorralError('invalid', `unsupported text encoding \`${encoding}\``, 0);
  return new Uint8Array(Buffer.from(text, name));
}
