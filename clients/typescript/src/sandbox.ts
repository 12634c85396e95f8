// A Cloudflare-shaped sandbox (the method names and result shapes of @cloudflare/sandbox's
// ExecutionSession) over one corral session. Every method is one or a few corrald calls; where
// corrald has no endpoint yet, the documented endpoint is still called and its error surfaces.
import type { CorralClient, EventStream, TerminalRequest } from './client.js';
import type { Terminal, TerminalAttachOptions } from './terminal.js';
import { eventBytes, shellExitCode } from './client.js';
import { CorralError, abortError, throwIfSetupFailed } from './errors.js';
import type { ContextInfo, ContextRunResult, ExitStatus, FileEntry, ProcessRecord, ProcessRequest, ShellInfo, StreamEvent } from './types.js';


export type ExecOptions = {
  timeout?: number;
  env?: Record<string, string | undefined>;
  cwd?: string;
  encoding?: string;
  stream?: boolean;
  onOutput?: (stream: 'stdout' | 'stderr', data: string) => void;
  onComplete?: (result: ExecResult) => void;
  onError?: (error: Error) => void;
  signal?: AbortSignal;
  /** A shell context of this session (see createSession). */
  sessionId?: string;
};

/** sandbox.terminal(): Cloudflare's PtyOptions (cols, rows, shell: the program) and how to attach. */
export type TerminalOptions = TerminalAttachOptions & {
  cols?: number; rows?: number; shell?: string; command?: string; cwd?: string; env?: Record<string, string>;
  /** A shell context of this session (see createSession) to start in. */
  sessionId?: string;
};

export type ExecResult = {
  success: boolean; exitCode: number; stdout: string; stderr: string; command: string;
  duration: number; timestamp: string; sessionId?: string;
  /** corral's word on how the command ended (`exited`, `signaled`, `timeout`, `oom`, ...): a
   * timeout's exitCode is 143 (SIGTERM) like any kill, this says it was the timeout. */
  status: ExitStatus;
};

export type ProcessStatus = 'starting' | 'running' | 'completed' | 'failed' | 'killed' | 'error';

export type ProcessOptions = {
  timeout?: number; env?: Record<string, string | undefined>; cwd?: string; encoding?: string;
  sessionId?: string;
  /**
   * A name for the process (Cloudflare's custom process id). corrald numbers processes itself
   * (`p1`, `p2`, ...) and takes no name, so the name is kept by this client: the Process's `id`
   * is the name, and getProcess, killProcess, getProcessLogs and streamProcessLogs take it, in
   * this client (any `client.sandbox(sid)` of the same CorralClient). `record.id` is corrald's id.
   */
  processId?: string;
};

/** A background process, as Cloudflare's Process. */
export type Process = {
  readonly id: string; readonly pid?: number; readonly command: string; readonly status: ProcessStatus;
  readonly startTime: Date; readonly endTime?: Date; readonly exitCode?: number; readonly sessionId?: string;
  /** corral's own record (exit reason, signal, usage). */
  readonly record: ProcessRecord;
  kill(signal?: string): Promise<void>;
  getStatus(): Promise<ProcessStatus>;
  getLogs(): Promise<{ stdout: string; stderr: string }>;
  waitForExit(timeout?: number): Promise<{ exitCode: number }>;
  waitForPort(port: number, options?: { timeout?: number }): Promise<void>;
  waitForLog(pattern: string | RegExp, timeout?: number): Promise<{ line: string; match?: RegExpMatchArray }>;
};

type Stamp = { success: boolean; timestamp: string };
export type WriteFileResult = Stamp & { path: string };
export type ReadFileResult = Stamp & { path: string; content: string; encoding: 'utf-8' | 'base64'; isBinary: boolean; size: number };
export type MkdirResult = Stamp & { path: string; recursive: boolean };
export type DeleteFileResult = Stamp & { path: string };
export type RenameFileResult = Stamp & { path: string; newPath: string };
export type MoveFileResult = RenameFileResult;
export type FileExistsResult = Stamp & { path: string; exists: boolean };
export type FileInfo = {
  name: string; absolutePath: string; relativePath: string; type: 'file' | 'directory' | 'symlink' | 'other';
  size: number; modifiedAt: string; mode: string;
  permissions: { readable: boolean; writable: boolean; executable: boolean };
};
export type ListFilesResult = Stamp & { path: string; files: FileInfo[]; count: number };
export type GitCheckoutResult = Stamp & { repoUrl: string; branch: string; targetDir: string };
export type SessionOptions = { id?: string; env?: Record<string, string | undefined>; cwd?: string };
export type CodeContext = { readonly id: string; readonly language: string; readonly cwd: string; readonly createdAt: Date; readonly lastUsed: Date };
/** One result of a run, Cloudflare-shaped: `text` is text/plain, `json` the parsed application/json, `data` the whole mime bundle. */
export type CodeResult = {
  text?: string; html?: string; png?: string; jpeg?: string; svg?: string; latex?: string; markdown?: string;
  javascript?: string; json?: unknown; data: Record<string, string>; formats(): string[];
};
export type CodeExecutionError = { name: string; value: string; message: string; traceback: string[] };
export type ExecutionResult = {
  code: string; logs: { stdout: string[]; stderr: string[] };
  error?: CodeExecutionError; results: CodeResult[];
  /** corrald's word on the run: ok, error, timeout (interrupted) or context_died. */
  status: ContextRunResult['status'];
};
/** The languages corrald's code contexts run (POST .../contexts: python3 or node). */
export type CodeLanguage = 'python' | 'javascript';
export type RunCodeOptions = {
  context?: CodeContext; language?: CodeLanguage; timeout?: number; signal?: AbortSignal;
  onStdout?: (output: { text: string; timestamp: number }) => void | Promise<void>;
  onStderr?: (output: { text: string; timestamp: number }) => void | Promise<void>;
  onResult?: (result: CodeResult) => void | Promise<void>;
  onError?: (error: CodeExecutionError) => void | Promise<void>;
};

const now = () => new Date().toISOString();
const decoder = () => new TextDecoder();

/** Cloudflare's process status from corral's exit reason. */
export function processStatus(record: ProcessRecord): ProcessStatus {
  if (record.running) return 'running';
  switch (record.status) {
    case 'exited': return record.exitCode === 0 ? 'completed' : 'failed';
    case 'signaled': case 'killed': return 'killed';
    case 'setup-failed': return 'error';
    default: return 'failed';  // timeout, oom, pids-limit, seccomp
  }
}

/** Cloudflare env semantics: an undefined value is "not configured" and is left out. */
function definedEnv(env?: Record<string, string | undefined>): Record<string, string> | undefined {
  if (!env) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}

function processRequest(command: string, options: { timeout?: number; env?: Record<string, string | undefined>; cwd?: string; sessionId?: string }): ProcessRequest {
  const request: ProcessRequest = { command };
  if (options.cwd !== undefined) request.cwd = options.cwd;
  const env = definedEnv(options.env);
  if (env) request.env = env;
  if (options.timeout !== undefined) request.timeoutMs = options.timeout;
  if (options.sessionId !== undefined) request.shell = options.sessionId;
  return request;
}

/**
 * Cloudflare's process names (ProcessOptions.processId) for one corral session: corrald takes no
 * name for a process, so the name -> corrald id map lives in the client. One per client and
 * session, so every CorralSandbox of the session (bound ones included) sees the same names.
 */
class ProcessNames {
  private readonly byName = new Map<string, string>();
  private readonly byProcess = new Map<string, string>();

  /** corrald's id for `id`: the process named `id`, else `id` itself (a corrald id). */
  resolve(id: string): string {
    return this.byName.get(id) ?? id;
  }
  /** The name of corrald process `proc`, else `proc`. */
  nameOf(proc: string): string {
    return this.byProcess.get(proc) ?? proc;
  }
  known(name: string): string | undefined {
    return this.byName.get(name);
  }
  set(name: string, proc: string): void {
    const previous = this.byName.get(name);
    if (previous !== undefined) this.byProcess.delete(previous);
    this.byName.set(name, proc);
    this.byProcess.set(proc, name);
  }

  private static readonly all = new WeakMap<CorralClient, Map<string, ProcessNames>>();
  static of(client: CorralClient, sid: string): ProcessNames {
    let sessions = ProcessNames.all.get(client);
    if (!sessions) ProcessNames.all.set(client, (sessions = new Map()));
    let names = sessions.get(sid);
    if (!names) sessions.set(sid, (names = new ProcessNames()));
    return names;
  }
}

/** `path` against `base` (an absolute directory), as corrald resolves a relative cwd. */
function resolveAgainst(base: string, path: string | undefined): string {
  if (path === undefined) return base;
  return path.startsWith('/') ? path : `${base.replace(/\/$/, '')}/${path}`;
}

/** A sandbox bound to a shell context: its methods, plus the context's record fields. */
export type BoundSandbox = CorralSandbox & Omit<ShellInfo, 'id'> & { readonly info: ShellInfo };

/** One corral session with Cloudflare's sandbox methods. */
export class CorralSandbox {
  /**
   * `sid` is the corral session; `shell`, when set, a shell context in it (what Cloudflare calls an
   * execution session): commands then run in that context, with its cwd and exported variables.
   */
  constructor(readonly client: CorralClient, readonly sid: string, readonly shell?: string) {}

  /** The shell context's id for a bound sandbox (Cloudflare's ExecutionSession.id), else the session's. */
  get id(): string {
    return this.shell ?? this.sid;
  }

  private request(command: string, options: { timeout?: number; env?: Record<string, string | undefined>; cwd?: string; sessionId?: string }): ProcessRequest {
    return processRequest(command, this.shell !== undefined && options.sessionId === undefined ? { ...options, sessionId: this.shell } : options);
  }

  // ---- commands
  /** Runs a command to its end (streaming to onOutput when `stream` is set). */
  async exec(command: string, options: ExecOptions = {}): Promise<ExecResult> {
    const started = Date.now();
    const timestamp = now();
    const request = this.request(command, options);
    try {
      let exitCode: number, status: ExitStatus, stdout = '', stderr = '';
      if (options.stream || options.onOutput || options.signal) {
        const events = await this.client.exec(this.sid, request, options.signal);
        const dec = { stdout: decoder(), stderr: decoder() };
        let final: Extract<StreamEvent, { type: 'exit' | 'error' }> | undefined;
        let stopOnAbort: (() => void) | undefined;
        try {
          for await (const ev of events) {
            if (ev.type === 'start' && options.signal) {
              // Closing the stream is corrald's abort; the explicit kill also covers a daemon
              // that lets a disconnected command run on.
              const signal = options.signal;
              stopOnAbort = () => void this.client.killProcess(this.sid, ev.id).catch(() => undefined);
              if (signal.aborted) stopOnAbort();
              else signal.addEventListener('abort', stopOnAbort, { once: true });
            }
            if (ev.type === 'stdout' || ev.type === 'stderr') {
              const text = dec[ev.type].decode(eventBytes(ev), { stream: true });
              if (ev.type === 'stdout') stdout += text; else stderr += text;
              options.onOutput?.(ev.type, text);
            } else if (ev.type === 'exit' || ev.type === 'error') final = ev;
          }
        } finally {
          if (stopOnAbort) options.signal!.removeEventListener('abort', stopOnAbort);
        }
        if (options.signal?.aborted) throw abortError(options.signal);
        if (!final || final.type === 'error')
          throw final ? new CorralError(final.code, final.message, 0) : new CorralError('stream_ended', 'exec stream ended without a final event', 0);
        throwIfSetupFailed(final, command);
        exitCode = shellExitCode(final);
        status = final.status;
      } else {
        const r = await this.client.run(this.sid, request, options.signal);
        throwIfSetupFailed(r, command);
        exitCode = shellExitCode(r);
        status = r.status;
        stdout = r.stdout ?? Buffer.from(r.stdoutBase64 ?? '', 'base64').toString('utf8');
        stderr = r.stderr ?? Buffer.from(r.stderrBase64 ?? '', 'base64').toString('utf8');
      }
      const result: ExecResult = { success: exitCode === 0, exitCode, stdout, stderr, command, duration: Date.now() - started, timestamp, status };
      const shellId = options.sessionId ?? this.shell;
      if (shellId !== undefined) result.sessionId = shellId;
      options.onComplete?.(result);
      return result;
    } catch (err) {
      options.onError?.(err as Error);
      throw err;
    }
  }

  /** Runs a command and returns corrald's NDJSON event stream (start/stdout/stderr/exit) as bytes. */
  async execStream(command: string, options: { timeout?: number; env?: Record<string, string | undefined>; cwd?: string; sessionId?: string; signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
    return (await this.client.exec(this.sid, this.request(command, options), options.signal)).toByteStream();
  }

  /** The same events as parsed objects. */
  async execEvents(command: string, options: { timeout?: number; env?: Record<string, string | undefined>; cwd?: string; sessionId?: string; signal?: AbortSignal } = {}): Promise<EventStream<StreamEvent>> {
    return this.client.exec(this.sid, this.request(command, options), options.signal);
  }

  /** The names given to processes of this session (ProcessOptions.processId). */
  private get names(): ProcessNames {
    return ProcessNames.of(this.client, this.sid);
  }

  /**
   * Starts a background process. In a shell context (a bound sandbox, or `sessionId`) it starts
   * from the context's cwd and exported variables: corrald runs only foreground commands inside a
   * context (its queue), so the context's state is read and passed as the process's cwd and env
   * (a relative `cwd` resolves against the context's). `processId` names it (see ProcessOptions).
   */
  async startProcess(command: string, options: ProcessOptions = {}): Promise<Process> {
    const { sessionId, processId, ...rest } = options;
    const shell = sessionId ?? this.shell;
    const request = processRequest(command, rest);
    if (shell !== undefined) {
      const context = await this.client.getShell(this.sid, shell);
      const base = context.cwd ?? '/';
      request.cwd = resolveAgainst(base, rest.cwd);
      request.env = { ...(context.env ?? {}), ...(request.env ?? {}) };
    }
    if (processId !== undefined) await this.checkNameFree(processId);
    const record = await this.client.spawn(this.sid, request);
    if (processId !== undefined) this.names.set(processId, record.id);
    return this.toProcess(record, shell);
  }

  /** A name may be given again once the process that had it ended (Cloudflare cleans those up). */
  private async checkNameFree(name: string): Promise<void> {
    const holder = this.names.known(name);
    if (holder === undefined) return;
    const running = await this.client.getProcess(this.sid, holder).then((r) => r.running, () => false);
    if (running)
      throw new CorralError('exists', `process id \`${name}\` is taken by running process \`${holder}\` of session \`${this.sid}\``, 409);
  }

  /** Every process of the sandbox (corral keeps process records per session, not per shell context). */
  async listProcesses(_sessionId?: string): Promise<Process[]> {
    return (await this.client.listProcesses(this.sid)).map((r) => this.toProcess(r));
  }

  /** A process by its name (processId) or corrald id; null when there is none. */
  async getProcess(id: string, _sessionId?: string): Promise<Process | null> {
    try {
      return this.toProcess(await this.client.getProcess(this.sid, this.names.resolve(id)));
    } catch (err) {
      if (err instanceof CorralError && err.status === 404 && err.code !== 'no_such_session') return null;
      throw err;
    }
  }

  /** Without a signal: SIGTERM to its tree, grace, kill. With one: that signal to the process. */
  async killProcess(id: string, signal?: string): Promise<void> {
    await this.kill(this.names.resolve(id), signal);
  }
  private async kill(proc: string, signal?: string): Promise<void> {
    if (signal === undefined) await this.client.killProcess(this.sid, proc);
    else await this.client.signalProcess(this.sid, proc, signal);
  }

  async killAllProcesses(): Promise<number> {
    return (await this.client.killAllProcesses(this.sid)).killed;
  }

  /** All kept output of a process (bounded by the policy's output cap). */
  async getProcessLogs(id: string): Promise<{ stdout: string; stderr: string; processId: string }> {
    return { ...(await this.readLogs(this.names.resolve(id))), processId: id };
  }
  private async readLogs(proc: string): Promise<{ stdout: string; stderr: string }> {
    const read = async (stream: 'stdout' | 'stderr') => {
      const chunks: Uint8Array[] = [];
      let offset = 0;
      for (;;) {
        const chunk = await this.client.logs(this.sid, proc, { stream, offset });
        const bytes = eventBytes(chunk);
        if (bytes.length) chunks.push(bytes);
        if (bytes.length === 0 || chunk.nextOffset === offset) break;
        offset = chunk.nextOffset;
      }
      return Buffer.concat(chunks).toString('utf8');
    };
    return { stdout: await read('stdout'), stderr: await read('stderr') };
  }

  /** A process's output as corrald's NDJSON stream (bytes), following it to its exit. */
  async streamProcessLogs(processId: string, options: { signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
    return (await this.client.streamProcess(this.sid, this.names.resolve(processId), options.signal ? { signal: options.signal } : {})).toByteStream();
  }

  // ---- files
  async writeFile(path: string, content: string | ReadableStream<Uint8Array>, options: { encoding?: string } = {}): Promise<WriteFileResult> {
    const body = typeof content === 'string' && options.encoding === 'base64' ? new Uint8Array(Buffer.from(content, 'base64')) : content;
    await this.client.writeFile(this.sid, path, body);
    return { success: true, path, timestamp: now() };
  }

  async readFile(path: string, options: { encoding?: string } = {}): Promise<ReadFileResult> {
    const bytes = await this.client.readFileBytes(this.sid, path);
    let text: string | undefined;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch {
      text = undefined;
    }
    const asBase64 = options.encoding === 'base64' || text === undefined;
    return {
      success: true, path, timestamp: now(), size: bytes.length, isBinary: text === undefined,
      encoding: asBase64 ? 'base64' : 'utf-8',
      content: asBase64 ? Buffer.from(bytes).toString('base64') : text!,
    };
  }

  async readFileStream(path: string): Promise<ReadableStream<Uint8Array>> {
    return this.client.readFile(this.sid, path);
  }

  async mkdir(path: string, options: { recursive?: boolean } = {}): Promise<MkdirResult> {
    await this.client.mkdir(this.sid, path, options);
    return { success: true, path, recursive: options.recursive ?? false, timestamp: now() };
  }

  /** Deletes a file (or an empty directory). */
  async deleteFile(path: string): Promise<DeleteFileResult> {
    await this.client.deleteFile(this.sid, path);
    return { success: true, path, timestamp: now() };
  }

  async renameFile(oldPath: string, newPath: string): Promise<RenameFileResult> {
    await this.client.move(this.sid, oldPath, newPath);
    return { success: true, path: oldPath, newPath, timestamp: now() };
  }

  async moveFile(sourcePath: string, destinationPath: string): Promise<MoveFileResult> {
    await this.client.move(this.sid, sourcePath, destinationPath);
    return { success: true, path: sourcePath, newPath: destinationPath, timestamp: now() };
  }

  async exists(path: string): Promise<FileExistsResult> {
    try {
      await this.client.stat(this.sid, path);
      return { success: true, path, exists: true, timestamp: now() };
    } catch (err) {
      if (err instanceof CorralError && err.code === 'not_found') return { success: true, path, exists: false, timestamp: now() };
      throw err;
    }
  }

  /** A directory's entries; `absolutePath` is where corrald resolved `path` (relative to the session's cwd). */
  async listFiles(path: string, options: { recursive?: boolean; includeHidden?: boolean } = {}): Promise<ListFilesResult> {
    const listing = await this.client.listDirectory(this.sid, path, options.recursive ? { recursive: true } : {});
    const base = listing.path.startsWith('/') ? listing.path : path;
    const files = listing.entries
      .filter((f) => options.includeHidden || !f.name.split('/').some((part) => part.startsWith('.')))  // .git/config too
      .map((f) => toFileInfo(base, f));
    return { success: true, path, files, count: files.length, timestamp: now() };
  }

  /** File events under `path` as corrald's NDJSON stream (GET .../files/watch). */
  async watch(path: string, options: { recursive?: boolean; include?: string[]; exclude?: string[]; signal?: AbortSignal } = {}): Promise<ReadableStream<Uint8Array>> {
    const { include, exclude, ...rest } = options;
    if (include || exclude)
      throw new CorralError('invalid', 'watch include/exclude patterns are not part of corrald\'s files/watch endpoint', 400);
    return (await this.client.watch(this.sid, path, rest)).toByteStream();
  }

  async gitCheckout(repoUrl: string, options: { branch?: string; targetDir?: string; depth?: number; cloneTimeoutMs?: number } = {}): Promise<GitCheckoutResult> {
    const request: { url: string; branch?: string; targetDir?: string; depth?: number; timeoutMs?: number } = { url: repoUrl };
    if (options.branch !== undefined) request.branch = options.branch;
    if (options.targetDir !== undefined) request.targetDir = options.targetDir;
    if (options.depth !== undefined) request.depth = options.depth;
    if (options.cloneTimeoutMs !== undefined) request.timeoutMs = options.cloneTimeoutMs;
    const reply = await this.client.gitCheckout(this.sid, request);
    return {
      success: true, repoUrl, timestamp: now(),
      branch: String(reply.branch ?? options.branch ?? ''), targetDir: String(reply.targetDir ?? options.targetDir ?? ''),
    };
  }

  /** Sets session env vars; an undefined value unsets the variable. */
  async setEnvVars(envVars: Record<string, string | undefined>): Promise<void> {
    const set: Record<string, string> = {};
    const unset: string[] = [];
    for (const [k, v] of Object.entries(envVars)) if (v === undefined) unset.push(k); else set[k] = v;
    await this.client.patchEnv(this.sid, { set, unset });
  }

  // ---- shell contexts (Cloudflare's "sessions" inside one sandbox)
  /** A shell context in this session, as a sandbox whose commands run in it. */
  async createSession(options: SessionOptions = {}): Promise<BoundSandbox> {
    const request: { id?: string; cwd?: string; env?: Record<string, string> } = {};
    if (options.id !== undefined) request.id = options.id;
    if (options.cwd !== undefined) request.cwd = options.cwd;
    const env = definedEnv(options.env);
    if (env) request.env = env;
    return this.bound(await this.client.createShell(this.sid, request));
  }
  /** An existing shell context, as a sandbox bound to it (404 when it does not exist). */
  async getSession(sessionId: string): Promise<BoundSandbox> {
    return this.bound(await this.client.getShell(this.sid, sessionId));
  }
  /** A sandbox bound to shell context `info`, carrying the context's record (cwd, env, ...) too. */
  private bound(info: ShellInfo): BoundSandbox {
    const { id: _id, ...fields } = info;
    return Object.assign(new CorralSandbox(this.client, this.sid, info.id), fields, { info });
  }
  async deleteSession(sessionId: string): Promise<{ success: boolean; sessionId: string; timestamp: string }> {
    await this.client.deleteShell(this.sid, sessionId);
    return { success: true, sessionId, timestamp: now() };
  }

  // ---- code contexts
  /**
   * A persistent interpreter (python3 or node as the sandbox has them); `timeout` bounds the
   * request (ms). corrald runs python and javascript only: Cloudflare's `typescript` is not offered.
   */
  async createCodeContext(options: { language?: CodeLanguage; cwd?: string; envVars?: Record<string, string | undefined>; timeout?: number } = {}): Promise<CodeContext> {
    const request: { language: string; cwd?: string; env?: Record<string, string> } = { language: options.language ?? 'python' };
    if (options.cwd !== undefined) request.cwd = options.cwd;
    const env = definedEnv(options.envVars);
    if (env) request.env = env;
    return toCodeContext(await this.client.createContext(this.sid, request, options.timeout !== undefined ? AbortSignal.timeout(options.timeout) : undefined));
  }
  /**
   * Runs code; state persists in its context. Without `context` it runs in this sandbox's default
   * context of `language` (python), created on first use. With any `on*` callback the run is
   * streamed and the callbacks get its events as they happen.
   */
  async runCode(code: string, options: RunCodeOptions = {}): Promise<ExecutionResult> {
    if (options.context) return this.runCodeIn(options.context, code, options);
    const language = options.language ?? 'python';
    const context = await this.defaultCodeContext(language);
    let result: ExecutionResult;
    try {
      result = await this.runCodeIn(context, code, options);
    } catch (err) {
      // The default context's interpreter died after its last run (killed, OOM, an exit in a
      // child...): the caller never saw its id, so a new one takes its place (its state is gone).
      if (!(err instanceof CorralError && err.code === 'context_dead')) throw err;
      await this.dropDefaultContext(language, context);
      return this.runCodeIn(await this.defaultCodeContext(language), code, options);
    }
    // Died during this run: the next run gets a new default context.
    if (result.status === 'context_died') await this.dropDefaultContext(language, context);
    return result;
  }
  private async runCodeIn(context: CodeContext, code: string, options: RunCodeOptions): Promise<ExecutionResult> {
    const request: { code: string; timeoutMs?: number } = { code };
    if (options.timeout !== undefined) request.timeoutMs = options.timeout;
    if (!options.onStdout && !options.onStderr && !options.onResult && !options.onError)
      return toExecutionResult(code, await this.client.runCode(this.sid, context.id, request, options.signal));
    const outcome: ContextRunResult = { context: context.id, status: 'ok', results: [], stdout: '', stderr: '', truncated: false, durationMs: 0 };
    const events = await this.client.runCodeStream(this.sid, context.id, request, options.signal);
    for await (const event of events) {
      if (event.type === 'stdout' || event.type === 'stderr') {
        outcome[event.type] += event.text;
        await (event.type === 'stdout' ? options.onStdout : options.onStderr)?.({ text: event.text, timestamp: Date.now() });
      } else if (event.type === 'result') {
        outcome.results.push(event.data);
        await options.onResult?.(toCodeResult(event.data));
      } else if (event.type === 'error' && 'code' in event) {
        throw new CorralError(event.code, event.message, 503);
      } else if (event.type === 'error') {
        outcome.error = { name: event.name, value: event.value, traceback: event.traceback };
        await options.onError?.(toCodeError(outcome.error));
      } else if (event.type === 'end') {
        Object.assign(outcome, { status: event.status, durationMs: event.durationMs, truncated: event.truncated });
        if (event.message !== undefined) outcome.message = event.message;
      }
    }
    return toExecutionResult(code, outcome);
  }
  async listCodeContexts(): Promise<CodeContext[]> { return (await this.client.listContexts(this.sid)).map(toCodeContext); }
  async deleteCodeContext(contextId: string): Promise<void> {
    for (const [language, context] of this.defaultContexts) if (context.id === contextId) this.defaultContexts.delete(language);
    await this.client.deleteContext(this.sid, contextId);
  }
  private readonly defaultContexts = new Map<string, CodeContext>();
  private async dropDefaultContext(language: CodeLanguage, context: CodeContext): Promise<void> {
    if (this.defaultContexts.get(language)?.id === context.id) this.defaultContexts.delete(language);
    await this.client.deleteContext(this.sid, context.id).catch(() => undefined);  // its record only
  }
  private async defaultCodeContext(language: CodeLanguage): Promise<CodeContext> {
    const known = this.defaultContexts.get(language);
    if (known) return known;
    const context = await this.createCodeContext({ language });
    this.defaultContexts.set(language, context);
    return context;
  }

  // ---- ports
  /**
   * The URL of a port leased to this session. corral leases ports from its pool (POST .../ports):
   * call `leasePort()` for one and have the process listen on it; a port that is not leased is a
   * CorralError `port_not_leased`.
   */
  async exposePort(port: number, _options: { name?: string; hostname?: string } = {}): Promise<{ url: string; port: number; name: string | undefined }> {
    const leased = await this.client.listPorts(this.sid);
    if (!leased.some((l) => l.port === port))
      throw new CorralError('port_not_leased', `port ${port} is not leased to session \`${this.sid}\` (leased: ${leased.map((l) => l.port).join(', ') || 'none'})`, 409);
    const { url } = await this.client.portEndpoint(this.sid, port, 'http');
    return { url, port, name: _options.name };
  }
  /** Leases a fresh port. */
  leasePort(): Promise<{ port: number; url: string }> { return this.client.leasePort(this.sid); }
  async waitForPort(port: number, options: { timeout?: number } = {}): Promise<void> {
    await this.client.waitPort(this.sid, port, options.timeout !== undefined ? { timeoutMs: options.timeout } : {});
  }

  /**
   * A terminal (Cloudflare's `terminal()` with its PtyOptions `cols`, `rows`, `shell`): starts a
   * process on a PTY — the session's login shell, else the `shell` program, else `command` — and
   * attaches to it over its WebSocket. `sessionId` names one of this session's shell contexts
   * (createSession) to start in, as for exec.
   */
  async terminal(options: TerminalOptions = {}): Promise<Terminal> {
    const { command, cwd, env, shell, sessionId, cols, rows, ...attach } = options;
    const request: TerminalRequest = { cols: cols ?? 80, rows: rows ?? 24 };
    const program = command ?? shell;
    if (program !== undefined) request.command = program;
    if (cwd !== undefined) request.cwd = cwd;
    if (env !== undefined) request.env = env;
    if (sessionId !== undefined) request.shell = sessionId;
    return this.client.openTerminal(this.sid, request, attach);
  }
  /** Attaches again to a running terminal (its scrollback comes first). */
  attachTerminal(proc: string, options: TerminalAttachOptions = {}): Promise<Terminal> {
    return this.client.attachTerminal(this.sid, proc, options);
  }
  /** The WebSocket path of a terminal process (GET .../terminals/{proc}/ws). */
  terminalPath(proc: string): string {
    return `/v1/sessions/${encodeURIComponent(this.sid)}/terminals/${encodeURIComponent(proc)}/ws`;
  }

  private toProcess(record: ProcessRecord, sessionId?: string): Process {
    const sandbox = this;
    const id = record.id;  // corrald's: what the methods below address
    const proc: Process = {
      id: this.names.nameOf(id), pid: record.pid, command: record.command ?? record.argv.join(' '), status: processStatus(record),
      startTime: new Date(record.startedAt), record,
      ...(record.running ? {} : { endTime: new Date(Date.parse(record.startedAt) + record.durationMs) }),
      ...(record.exitCode !== null ? { exitCode: record.exitCode } : {}),
      ...(sessionId !== undefined ? { sessionId } : {}),
      kill: (signal?: string) => sandbox.kill(id, signal),
      getStatus: async () => processStatus(await sandbox.client.getProcess(sandbox.sid, id)),
      getLogs: () => sandbox.readLogs(id),
      waitForExit: async (timeout?: number) => {
        const r = await sandbox.client.waitProcess(sandbox.sid, id, timeout !== undefined ? { timeoutMs: timeout } : {});
        if (!r.finished) throw new CorralError('timeout', `process \`${id}\` still runs after ${timeout} ms`, 504);
        return { exitCode: shellExitCode(r) };
      },
      waitForPort: (port: number, options?: { timeout?: number }) => sandbox.waitForPort(port, options),
      waitForLog: async (pattern: string | RegExp, timeout?: number) => {
        const controller = new AbortController();
        const timer = timeout !== undefined ? setTimeout(() => controller.abort(), timeout) : undefined;
        try {
          const events = await sandbox.client.streamProcess(sandbox.sid, id, { signal: controller.signal });
          let pending = '';
          for await (const ev of events) {
            if (ev.type !== 'stdout' && ev.type !== 'stderr') continue;
            pending += Buffer.from(eventBytes(ev)).toString('utf8');
            const lines = pending.split('\n');
            pending = lines.pop()!;
            for (const line of [...lines, pending]) {
              const match = typeof pattern === 'string' ? (line.includes(pattern) ? undefined : null) : line.match(pattern);
              if (match !== null) {
                controller.abort();
                return match ? { line, match } : { line };
              }
            }
          }
          throw new CorralError('not_found', `process \`${id}\` exited without printing ${String(pattern)}`, 404);
        } catch (err) {
          if (controller.signal.aborted && (err as Error).name === 'AbortError')
            throw new CorralError('timeout', `no line matching ${String(pattern)} within ${timeout} ms`, 504);
          throw err;
        } finally {
          if (timer) clearTimeout(timer);
        }
      },
    };
    return proc;
  }
}

function toFileInfo(base: string, f: FileEntry): FileInfo {
  const absolutePath = f.name.startsWith('/') ? f.name : `${base.replace(/\/$/, '')}/${f.name}`;
  const mode = f.mode & 0o777;
  return {
    name: f.name.split('/').pop()!, absolutePath, relativePath: f.name,
    type: f.type === 'dir' ? 'directory' : f.type === 'file' || f.type === 'symlink' ? f.type : 'other',
    size: f.size, modifiedAt: f.mtime, mode: mode.toString(8).padStart(3, '0'),
    permissions: { readable: (mode & 0o400) !== 0, writable: (mode & 0o200) !== 0, executable: (mode & 0o100) !== 0 },
  };
}

function toCodeContext(c: ContextInfo): CodeContext {
  const created = c.createdAt ? new Date(c.createdAt as string) : new Date();
  return { id: c.id, language: c.language, cwd: c.cwd ?? '', createdAt: created, lastUsed: created };
}

const MIME_FIELDS: [string, keyof CodeResult][] = [
  ['text/plain', 'text'], ['text/html', 'html'], ['image/png', 'png'], ['image/jpeg', 'jpeg'],
  ['image/svg+xml', 'svg'], ['text/latex', 'latex'], ['text/markdown', 'markdown'], ['application/javascript', 'javascript'],
];

function toCodeResult(data: Record<string, string>): CodeResult {
  const result: CodeResult = { data, formats: () => MIME_FIELDS.filter(([, f]) => result[f] !== undefined).map(([, f]) => f as string).concat(result.json !== undefined ? ['json'] : []) };
  for (const [mime, field] of MIME_FIELDS) if (data[mime] !== undefined) (result as Record<string, unknown>)[field] = data[mime];
  if (data['application/json'] !== undefined) {
    try { result.json = JSON.parse(data['application/json']); } catch { /* kept in data */ }
  }
  return result;
}

function toCodeError(e: { name: string; value: string; traceback: string[] }): CodeExecutionError {
  return { name: e.name, value: e.value, message: e.value, traceback: e.traceback };
}

function toExecutionResult(code: string, r: ContextRunResult): ExecutionResult {
  const result: ExecutionResult = {
    code, status: r.status, logs: { stdout: r.stdout ? [r.stdout] : [], stderr: r.stderr ? [r.stderr] : [] },
    results: r.results.map(toCodeResult),
  };
  if (r.error) result.error = toCodeError(r.error);
  else if (r.status === 'context_died') result.error = { name: 'ContextDied', value: r.message ?? '', message: r.message ?? '', traceback: [] };
  return result;
}
