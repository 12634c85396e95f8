// Compile-time proof (`npm run typecheck`, tsc --noEmit) that the provider and its sessions are
// what the published AI SDK interfaces ask for, and that the Cloudflare-shaped sandbox's methods
// accept the calls a program written against @cloudflare/sandbox makes. Nothing here runs.
import type { HarnessV1NetworkSandboxSession, HarnessV1SandboxProvider } from '@ai-sdk/harness';
import type { Experimental_SandboxProcess, Experimental_SandboxSession } from '@ai-sdk/provider-utils';
import type { ExecutionSession, PtyOptions } from '@cloudflare/sandbox';

import {
  createCorralSandboxProvider, type CorralNetworkSandboxSession, type CorralSandbox,
  type CorralSandboxProcess, type CorralSandboxSession,
} from '../src/index.js';

type Assert<T extends true> = T;
type Extends<A, B> = [A] extends [B] ? true : false;

// The provider is a HarnessV1SandboxProvider.
const provider: HarnessV1SandboxProvider = createCorralSandboxProvider({ socketPath: '/run/corral/corrald.sock' });
void provider;

export type Checks = [
  Assert<Extends<CorralNetworkSandboxSession, HarnessV1NetworkSandboxSession>>,
  Assert<Extends<CorralSandboxSession, Experimental_SandboxSession>>,
  Assert<Extends<ReturnType<CorralNetworkSandboxSession['restricted']>, Experimental_SandboxSession>>,
  Assert<Extends<CorralSandboxProcess, Experimental_SandboxProcess>>,
  // The restricted view has no infra surface (stop, destroy, ports, network).
  Assert<Extends<'stop' extends keyof CorralSandboxSession ? true : false, false>>,
  Assert<Extends<'setNetworkPolicy' extends keyof CorralSandboxSession ? true : false, false>>,
  Assert<Extends<'getPortEndpoint' extends keyof CorralSandboxSession ? true : false, false>>,
];

// Cloudflare's ExecutionSession methods that corral offers: the parameters a Cloudflare program
// passes are accepted by corral's methods.
type Params<F> = F extends (...args: infer A) => unknown ? A : never;
type Accepts<K extends keyof ExecutionSession & keyof CorralSandbox> = Extends<
  Params<ExecutionSession[K]>,
  Params<CorralSandbox[K]>
>;
export type CloudflareChecks = [
  Assert<Accepts<'exec'>>,
  Assert<Accepts<'execStream'>>,
  Assert<Accepts<'startProcess'>>,
  Assert<Accepts<'listProcesses'>>,
  Assert<Accepts<'getProcess'>>,
  Assert<Accepts<'killProcess'>>,
  Assert<Accepts<'killAllProcesses'>>,
  Assert<Accepts<'getProcessLogs'>>,
  Assert<Accepts<'streamProcessLogs'>>,
  Assert<Accepts<'writeFile'>>,
  Assert<Accepts<'mkdir'>>,
  Assert<Accepts<'deleteFile'>>,
  Assert<Accepts<'renameFile'>>,
  Assert<Accepts<'moveFile'>>,
  Assert<Accepts<'exists'>>,
  Assert<Accepts<'listFiles'>>,
  Assert<Accepts<'watch'>>,
  Assert<Accepts<'gitCheckout'>>,
  Assert<Accepts<'setEnvVars'>>,
  Assert<Accepts<'readFileStream'>>,
  // createCodeContext: Cloudflare's options except `language: 'typescript'`, which corrald does
  // not run (its contexts are python3 and node); the type says so instead of a 400 at run time.
  Assert<Extends<
    [(Omit<NonNullable<Params<ExecutionSession['createCodeContext']>[0]>, 'language'> & { language?: 'python' | 'javascript' })?],
    Params<CorralSandbox['createCodeContext']>
  >>,
  Assert<Extends<Params<ExecutionSession['createCodeContext']>, Params<CorralSandbox['createCodeContext']>> extends true ? false : true>,
  Assert<Accepts<'listCodeContexts'>>,
  Assert<Accepts<'deleteCodeContext'>>,
  // terminal(): Cloudflare's takes the Worker's upgrade Request and PtyOptions; corral's client
  // is the WebSocket's other end itself, so it takes the PtyOptions (cols, rows, shell).
  Assert<Extends<PtyOptions, NonNullable<Parameters<CorralSandbox['terminal']>[0]>>>,
];

// Results carry Cloudflare's fields (a Cloudflare program reads them unchanged).
type ResultOf<T, K extends keyof T> = T[K] extends (...a: never[]) => Promise<infer R> ? R : never;
export type ResultChecks = [
  Assert<Extends<Pick<ResultOf<CorralSandbox, 'exec'>, keyof ResultOf<ExecutionSession, 'exec'>>, ResultOf<ExecutionSession, 'exec'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'mkdir'>, ResultOf<ExecutionSession, 'mkdir'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'writeFile'>, ResultOf<ExecutionSession, 'writeFile'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'exists'>, ResultOf<ExecutionSession, 'exists'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'listFiles'>, ResultOf<ExecutionSession, 'listFiles'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'renameFile'>, ResultOf<ExecutionSession, 'renameFile'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'getProcessLogs'>, ResultOf<ExecutionSession, 'getProcessLogs'>>>,
  Assert<Extends<ResultOf<CorralSandbox, 'gitCheckout'>, ResultOf<ExecutionSession, 'gitCheckout'>>>,
];
