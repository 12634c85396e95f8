// The shapes corrald answers with (docs/API.md, docs/openapi.yaml).

/** Why a process ended (one type across the API). */
export type ExitStatus =
  | 'running' | 'exited' | 'signaled' | 'timeout' | 'oom' | 'pids-limit' | 'seccomp' | 'killed' | 'setup-failed' | 'unknown';

/** Resource usage measured from the cgroup (null where the host does not measure it). */
export type Usage = {
  cpuUserUsec: number; cpuSystemUsec: number; cpuTotalUsec: number;
  memoryCurrentBytes: number | null; memoryPeakBytes: number | null;
  pidsCurrent: number | null; pidsPeak: number | null;
  ioReadBytes: number | null; ioWriteBytes: number | null;
  oomKills: number; pidsLimitHits: number;
};

/**
 * What a process tree's seccomp filter refused, by syscall name (docs/SECCOMP.md "Refusals in
 * reports"). null: no filter, or started by a previous run of corrald. `counted: false`: the filter
 * went in without a listener, and the maps and totals are null.
 */
export type SeccompRefusals = {
  counted: boolean;
  refused: Record<string, number> | null; refusedTotal: number | null;
  /** `action: log`: calls allowed and counted. */
  logged: Record<string, number> | null; loggedTotal: number | null;
} | null;

export type StreamStats = { bytes: number; droppedBytes: number; truncated: boolean; eof: boolean };

/** A process record. `exitCode` is a number once it ended (128+N for signal N). */
export type ProcessRecord = {
  id: string; pid: number; argv: string[]; cwd: string; command?: string;
  status: ExitStatus; running: boolean; exitCode: number | null; signal: string | null;
  startedAt: string; durationMs: number; timeoutMs?: number; error?: string;
  /** A process a previous run of corrald started: why its record is less than whole. */
  note?: string; outputLost?: boolean;
  /** Adopted after a restart with the pipes its holder kept: output goes on (offsets from 0). */
  outputResumed?: boolean;
  usage: Usage; output: { stdout: StreamStats; stderr: StreamStats }; truncated: boolean; stdinOpen: boolean;
  /** A process on a PTY (POST .../terminals): attach to it over its WebSocket. */
  terminal?: boolean;
  seccomp: SeccompRefusals;
};

/** The answer of `run`: the final record with the kept output (bytes that are not UTF-8 come base64). */
export type RunResult = ProcessRecord & {
  stdout?: string; stdoutBase64?: string; stderr?: string; stderrBase64?: string;
  /** Bytes left out between the kept head and tail of a stream past the output cap. */
  omittedBytes?: { stdout: number; stderr: number };
};

/** A command for run, exec or a background process: `command` (a shell string) or `argv`. */
export type ProcessRequest = {
  command?: string; argv?: string[]; cwd?: string; env?: Record<string, string>;
  timeoutMs?: number; stdin?: string; stdinOpen?: boolean;
  /** Run inside this shell context (DESIGN.md "Shell contexts"). */
  shell?: string;
};

export type PortLease = { port: number; url: string };

export type SessionSummary = {
  id: string; policy: string; state: string; createdAt: string;
  processes: number; running: number; ports: PortLease[];
};

export type SessionInfo = Omit<SessionSummary, 'processes'> & {
  processes: ProcessRecord[]; root: string; workdir: string; cwd: string; env: Record<string, string>;
  namespaces: unknown; notEnforced: unknown; usage: Usage; commandTimeoutMs: number | null;
  endReason?: string; endedAt?: string; processesKilled?: number;
};

export type CreatedSession = SessionInfo & { token: string; restrictedToken: string };

export type CreateSessionRequest = {
  policy?: string; policyYaml?: string; id?: string; env?: Record<string, string>; cwd?: string;
  commandTimeoutMs?: number;
};

export type EndSessionReport = {
  id: string; alreadyEnded: boolean; processesKilled: number; killedProcessIds: string[];
  endReason: string; durationMs: number;
};

/** One NDJSON event of `exec` or `processes/{proc}/stream`. */
export type StreamEvent =
  | { type: 'start'; seq: number; id: string; pid: number; stdoutOffset: number; stderrOffset: number }
  | { type: 'stdout' | 'stderr'; seq: number; offset: number; data?: string; dataBase64?: string; skipped?: number }
  | ({ type: 'exit'; seq: number } & ProcessRecord)
  | { type: 'error'; seq: number; code: string; message: string; running: boolean };

export type LogChunk = {
  stream: 'stdout' | 'stderr'; offset: number; nextOffset: number; skipped: number; eof: boolean;
  data?: string; dataBase64?: string;
};

export type FileEntry = {
  name: string; type: 'file' | 'dir' | 'symlink' | 'other'; size: number; mode: number;
  mtime: string; mtimeMs: number; mtimeNs: string; linkTarget?: string;
};

export type Health = {
  status: string; version: string; instance: string; cgroup: Record<string, unknown>;
  layers: Record<string, unknown>; sessions: number; portRange: { first: number; last: number };
  /** corrald --prepare POLICY=N: per policy, the pool's size and what is ready or being prepared. */
  prepared?: Record<string, { target: number; ready: number; preparing: number }>;
};

/** Egress policy (PATCH /v1/sessions/{sid}/network). */
export type NetworkPolicy = {
  mode: 'allow-all' | 'deny-all' | 'custom';
  allowedHosts?: readonly string[]; allowedCIDRs?: readonly string[]; deniedCIDRs?: readonly string[];
};

/** A shell context (DESIGN.md "Shell contexts"). */
export type ShellInfo = { id: string; cwd?: string; env?: Record<string, string>; [key: string]: unknown };

/** A code context (POST /v1/sessions/{sid}/contexts; docs/API.md "Code contexts"). */
export type ContextInfo = {
  id: string; language: string; status: 'starting' | 'idle' | 'running' | 'dead'; pid: number; process: string;
  cwd: string; version: string; runs: number; queued: number; error?: string;
  exit?: { status: string; exitCode: number | null; signal: string | null };
  [key: string]: unknown;
};

/** An exception the code raised. */
export type CodeError = { name: string; value: string; traceback: string[] };

/** POST .../contexts/{ctx}/run: the run's outcome. Each result maps mime types to values. */
export type ContextRunResult = {
  context: string; status: 'ok' | 'error' | 'timeout' | 'interrupted' | 'context_died';
  results: Record<string, string>[]; stdout: string; stderr: string; error?: CodeError;
  truncated: boolean; durationMs: number; message?: string;
};

/** One NDJSON event of a streamed run (Accept: application/x-ndjson); `end` is the last. */
export type CodeRunEvent =
  | { seq: number; type: 'stdout' | 'stderr'; text: string }
  | { seq: number; type: 'result'; data: Record<string, string> }
  | ({ seq: number; type: 'error' } & CodeError)
  | { seq: number; type: 'end'; status: ContextRunResult['status']; durationMs: number; truncated: boolean; message?: string }
  | { seq: number; type: 'error'; code: string; message: string };
