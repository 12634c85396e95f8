/** An error answered by corrald (`{"error": {"code", "message"}}`) or met on the way to it. */
export class CorralError extends Error {
  /** The API's error code (`not_found`, `no_such_session`, `no_such_route`, ...). */
  readonly code: string;
  /** The HTTP status; 0 when no response arrived (connection refused, socket missing). */
  readonly status: number;
  /** Policy diagnostics (file, line, column, key, message) for `invalid_policy`. */
  readonly diagnostics?: unknown;

  constructor(code: string, message: string, status: number, diagnostics?: unknown) {
    super(message);
    this.name = 'CorralError';
    this.code = code;
    this.status = status;
    if (diagnostics !== undefined) this.diagnostics = diagnostics;
  }
}

/** Parses an error body; a body that is not corrald's error shape still yields a CorralError. */
export function errorFromBody(status: number, body: string): CorralError {
  try {
    const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown; diagnostics?: unknown } };
    const e = parsed.error;
    if (e && typeof e.code === 'string' && typeof e.message === 'string')
      return new CorralError(e.code, e.message, status, e.diagnostics);
  } catch {
    // not JSON: fall through
  }
  return new CorralError('http_' + status, `HTTP ${status}: ${body.slice(0, 200)}`, status);
}

/** The error an aborted operation rejects with: the signal's reason, or a DOMException AbortError. */
export function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}

/**
 * A command that never ran: corrald reported `status: "setup-failed"` (a missing cwd, a program
 * that cannot be executed, ...). `message` is corrald's `error` (the step and errno, e.g.
 * ``chdir `/workspace/sub`: ENOENT``); `record` the process record. The status is 0: the failure
 * came in a result or stream event, not as an HTTP error.
 */
export class ProcessSetupError extends CorralError {
  /** The process record corrald answered (`status` is `setup-failed`; `exitCode` 126/127 or null). */
  readonly record: { id: string; status: string; exitCode: number | null; error?: string };

  constructor(record: { id: string; status: string; exitCode: number | null; error?: string }, command?: string) {
    const what = command !== undefined ? `\`${command}\`` : `process \`${record.id}\``;
    super('setup_failed', `${what} could not start: ${record.error ?? 'its setup failed (corrald gave no reason)'}`, 0);
    this.name = 'ProcessSetupError';
    this.record = record;
  }
}

/** Throws ProcessSetupError when `record` says the process never started. */
export function throwIfSetupFailed(record: { id: string; status: string; exitCode: number | null; error?: string }, command?: string): void {
  if (record.status === 'setup-failed') throw new ProcessSetupError(record, command);
}
