// A terminal session process over its WebSocket (GET /v1/sessions/{sid}/terminals/{proc}/ws,
// docs/API.md "Terminals"): binary messages are the terminal's bytes both ways, text messages JSON
// control (resize from here; error and exit from corrald). On attach corrald sends the kept
// scrollback first, then live output; detaching (close()) leaves the terminal running.
import { shellExitCode } from './client.js';
import { CorralError } from './errors.js';
import type { Transport } from './transport.js';
import type { ExitStatus, ProcessRecord } from './types.js';
import { connectWebSocket, type WebSocketConnection, type WebSocketOptions } from './websocket.js';

/** Input bytes per message: well below corrald's 1 MiB per client message. */
const INPUT_MESSAGE_BYTES = 256 << 10;

/** How the terminal's process ended (corrald's exit message). */
export type TerminalExit = {
  /** The exit code as a shell reports it: the code, or 128+N for signal N. */
  exitCode: number;
  status: ExitStatus;
  signal: string | null;
};

/** A control message corrald sent: `error` (bad_frame, resize_failed, input_refused, ...) or `exit`. */
export type TerminalControl =
  | { type: 'error'; code: string; message: string }
  | { type: 'exit'; status: ExitStatus; exitCode: number | null; signal: string | null }
  | { type: string; [key: string]: unknown };

export type TerminalAttachOptions = WebSocketOptions & {
  /** Called for each control message corrald sends (errors included). */
  onControl?: (message: TerminalControl) => void;
  /** Output bytes buffered unread before the socket stops reading (default 1 MiB). */
  highWaterMark?: number;
};

/**
 * One attached terminal. Read its output as `output` (a web ReadableStream) or by iterating the
 * terminal itself (not both); `exited` resolves with the exit once the process ended, and rejects
 * if the socket went away first (close(), corrald stopping, a bad frame).
 */
export class Terminal implements AsyncIterable<Uint8Array> {
  /** The process id of the terminal (`p3`). */
  readonly id: string;
  /** The record, when this client started the terminal. */
  readonly record: ProcessRecord | undefined;
  readonly output: ReadableStream<Uint8Array>;
  readonly exited: Promise<TerminalExit>;
  /** Error messages corrald sent on this socket (bad control frames, input refused...). */
  readonly errors: { code: string; message: string }[] = [];

  private connection: WebSocketConnection | undefined;
  private settle!: { resolve: (exit: TerminalExit) => void; reject: (error: Error) => void };
  private exit: TerminalExit | undefined;
  // Output not read yet. The stream's own queue would drop it when the stream errors, and what
  // came before a failure is still the terminal's output: this queue is drained first.
  private readonly queue: Uint8Array[] = [];
  private queuedBytes = 0;
  private readonly highWaterMark: number;
  private ended: { error?: Error } | undefined;
  private wake: (() => void) | undefined;
  private cancelled = false;

  private constructor(id: string, record: ProcessRecord | undefined, private readonly options: TerminalAttachOptions) {
    this.id = id;
    this.record = record;
    this.exited = new Promise<TerminalExit>((resolve, reject) => (this.settle = { resolve, reject }));
    // Nobody has to await `exited`: an unawaited rejection must not end the program.
    this.exited.catch(() => {});
    this.highWaterMark = options.highWaterMark ?? 1 << 20;
    this.output = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        while (this.queue.length === 0 && !this.ended) await new Promise<void>((r) => (this.wake = r));
        const chunk = this.queue.shift();
        if (chunk) {
          this.queuedBytes -= chunk.byteLength;
          if (this.queuedBytes < this.highWaterMark) this.connection?.resume();
          controller.enqueue(chunk);
        } else if (this.ended!.error) {
          controller.error(this.ended!.error);
        } else {
          controller.close();
        }
      },
      cancel: () => {
        this.cancelled = true;
        this.queue.length = 0;
        void this.close();
      },
    }, { highWaterMark: 0 });
  }

  /** Attaches to terminal `proc` of session `sid` (its scrollback comes first). */
  static async attach(transport: Transport, sid: string, proc: string, options: TerminalAttachOptions = {}, record?: ProcessRecord): Promise<Terminal> {
    const terminal = new Terminal(proc, record, options);
    const path = `/v1/sessions/${encodeURIComponent(sid)}/terminals/${encodeURIComponent(proc)}/ws`;
    terminal.connection = await connectWebSocket(transport, path, {
      message: (m) => (m.type === 'binary' ? terminal.bytes(m.data) : terminal.control(m.data)),
      closed: (code, reason, error) => terminal.closed(code, reason, error),
    }, options);
    return terminal;
  }

  /**
   * Types into the terminal (`'\x03'` is Ctrl-C). Resolves once the socket took the bytes. Large
   * input goes as several messages: corrald takes at most 1 MiB per message.
   */
  async write(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    let at = 0;
    do {
      await this.live().send(bytes.subarray(at, at + INPUT_MESSAGE_BYTES));
      at += INPUT_MESSAGE_BYTES;
    } while (at < bytes.length);
  }

  /** Sets the window size (1..4096 each); the foreground job gets SIGWINCH. */
  async resize(cols: number, rows: number): Promise<void> {
    for (const [name, value] of [['cols', cols], ['rows', rows]] as const)
      if (!Number.isInteger(value) || value < 1 || value > 4096)
        throw new CorralError('invalid', `${name} must be an integer in 1..4096, not ${value}`, 0);
    return this.live().send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** Pings corrald; resolves when it answered. */
  async ping(): Promise<void> {
    return this.live().ping();
  }

  /** Detaches: closes the socket (the terminal goes on running; attach again to continue). */
  async close(): Promise<void> {
    await this.connection?.close();
  }

  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    const reader = this.output.getReader();
    return {
      next: async () => {
        const { done, value } = await reader.read();
        return done ? { done: true, value: undefined } : { done: false, value };
      },
      return: async () => {
        reader.releaseLock();
        return { done: true, value: undefined };
      },
    };
  }

  private live(): WebSocketConnection {
    if (!this.connection?.open) throw new CorralError('closed', `terminal \`${this.id}\` is not attached`, 0);
    return this.connection;
  }

  private bytes(data: Uint8Array) {
    if (this.cancelled || this.ended) return;
    this.queue.push(data);
    this.queuedBytes += data.byteLength;
    // A reader that does not keep up: stop reading the socket (corrald then skips what falls out
    // of its scrollback for this client instead of holding the terminal back).
    if (this.queuedBytes >= this.highWaterMark) this.connection?.pause();
    this.wakeReader();
  }

  private wakeReader() {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }

  private control(text: string) {
    let message: TerminalControl;
    try {
      message = JSON.parse(text) as TerminalControl;
    } catch {
      return;  // not ours to act on; corrald only sends JSON
    }
    if (message === null || typeof message !== 'object') return;
    if (message.type === 'exit') {
      const m = message as Extract<TerminalControl, { type: 'exit' }>;
      this.exit = { exitCode: shellExitCode({ exitCode: m.exitCode ?? null, signal: m.signal ?? null }), status: m.status, signal: m.signal ?? null };
    } else if (message.type === 'error' && typeof message.code === 'string') {
      this.errors.push({ code: message.code, message: String(message.message) });
    }
    this.options.onControl?.(message);
  }

  private closed(code: number | undefined, reason: string, error?: Error) {
    if (this.exit) this.settle.resolve(this.exit);
    else this.settle.reject(error ?? new CorralError('detached', `terminal \`${this.id}\`: the socket closed (${code ?? 'no code'}${reason ? ': ' + reason : ''}) before the process exited`, 0));
    this.ended = error && !this.exit ? { error } : {};
    this.wakeReader();
  }
}
