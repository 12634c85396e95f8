/** corral-sandbox: a client of corrald, an AI SDK sandbox provider, Cloudflare-shaped sandboxes. */
export { CorralClient, EventStream, eventBytes, shellExitCode, type ClientOptions, type StreamOptions, type TerminalRequest } from './client.js';
export { Terminal, type TerminalAttachOptions, type TerminalControl, type TerminalExit } from './terminal.js';
export {
  FrameDecoder, WebSocketConnection, WebSocketProtocolError, connectWebSocket, encodeFrame, CloseCode, Opcode,
  type FrameLimits, type Message, type WebSocketOptions,
} from './websocket.js';
export { CorralError, ProcessSetupError } from './errors.js';
export { Transport, type ConnectionOptions, type Body } from './transport.js';
export { parseNdjson } from './ndjson.js';
export {
  createCorralSandboxProvider, CorralSandboxSession, CorralNetworkSandboxSession, sliceLines, corralSessionId,
  type ProcessExit, type RunOutput, type CorralSandboxProvider, type CorralSandboxProviderOptions, type CorralSandboxProcess, type SandboxProcessOptions,
} from './provider.js';
export * from './sandbox.js';
export type * from './types.js';
