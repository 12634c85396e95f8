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
