// corral's JavaScript code-context driver (issue 14). corrald starts it as `node -`, this file on
// its stdin, inside the sandbox, with fd 3 a socket to the daemon, and speaks the same length-prefixed JSON
// frames as the Python driver (4-byte big-endian length, then UTF-8 JSON; see python_driver.py).
// The code runs in one vm context that lives as long as the driver, so declarations (var, let,
// const, function, class) carry from one run to the next. console.* and process.stdout/stderr
// writes become stdout/stderr frames of the run. Interrupts: the daemon sends SIGINT at a run's
// timeout; the script runs with `breakOnSigint`, so a synchronous loop throws at once, and a final
// Promise that is still pending is abandoned (the run ends with an Interrupted error). Between
// runs SIGINT is ignored. A SIGINT that comes before the code runs under breakOnSigint (while the
// run's frame is read or the code compiled) is queued for the event loop, which a busy loop never
// gives back: the daemon repeats SIGINT until the run ends, and a later one breaks the loop.
//
// Top-level await: code with an `await` outside any function is rewritten by node's own REPL
// transform (internal/repl/await, reachable because corrald starts node with --expose-internals):
// its top-level declarations are hoisted out of an async wrapper, so they persist like a plain
// script's, and the wrapper returns the value of the final expression statement.
//
// Rich results follow IPython's convention, as the Python driver does: a final value with
// `_repr_html_()`, `_repr_png_()`... adds those mime types; `display(value)` sends a result in
// the middle of a run; `display.HTML(text)`, `display.PNG(bytes)`... build such values.
'use strict';
const net = require('net');
const path = require('path');
const util = require('util');
const vm = require('vm');
const { createRequire } = require('module');

const CHUNK = 64 * 1024;        // characters per stdout/stderr frame
const TEXT_LIMIT = 1 << 20;     // characters of one text result
const MAX_IN = 64 << 20;        // largest run frame accepted from the daemon
const BLOB_LIMIT = 4 << 20;     // characters of one encoded rich result (image/png base64, html)

// Node's REPL transform for top-level await; null where this node has none (then such code is
// the SyntaxError node gives it).
const topLevelAwait = (() => {
  try {
    return require('internal/repl/await').processTopLevelAwait;
  } catch (e) {
    return null;
  }
})();

const channel = new net.Socket({ fd: 3, readable: true, writable: true });
let current = null;             // id of the run in progress, null between runs
let interruptAwait = null;

// Lone surrogates are not UTF-8: the daemon would refuse the frame, so they become U+FFFD.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
function wellFormed(key, value) {
  return typeof value === 'string' ? value.replace(LONE_SURROGATE, '\ufffd') : value;
}

function send(message) {
  const body = Buffer.from(JSON.stringify(message, wellFormed), 'utf8');
  const head = Buffer.alloc(4);
  head.writeUInt32BE(body.length, 0);
  channel.write(Buffer.concat([head, body]));
}

function clip(text) {
  return text.length <= TEXT_LIMIT ? text
      : text.slice(0, TEXT_LIMIT) + `...[${text.length - TEXT_LIMIT} more characters]`;
}

function makeStream(name) {
  return {
    write(chunk, encoding, callback) {
      if (current !== null) {
        const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
        for (let i = 0; i < text.length; i += CHUNK)
          send({ type: name, run: current, text: text.slice(i, i + CHUNK) });
      }
      const done = typeof encoding === 'function' ? encoding : callback;
      if (typeof done === 'function') done();
      return true;
    },
  };
}

const out = makeStream('stdout');
const err = makeStream('stderr');
process.stdout.write = out.write;
process.stderr.write = err.write;

const sandbox = {
  console: new console.Console({ stdout: out, stderr: err, ignoreErrors: false }),
  require: createRequire(path.join(process.cwd(), '[corral-context]')),
  module: { exports: {} },
  process,
  display,
};
for (const name of ['Buffer', 'URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'fetch',
                    'structuredClone', 'setTimeout', 'clearTimeout', 'setInterval',
                    'clearInterval', 'setImmediate', 'clearImmediate', 'queueMicrotask',
                    'AbortController', 'performance', 'atob', 'btoa'])
  if (name in globalThis) sandbox[name] = globalThis[name];
const context = vm.createContext(sandbox);

// The `_repr_*_` methods a value may offer (IPython's names) and the mime type each one adds.
const REPRS = [['_repr_html_', 'text/html'], ['_repr_markdown_', 'text/markdown'],
               ['_repr_svg_', 'image/svg+xml'], ['_repr_latex_', 'text/latex'],
               ['_repr_json_', 'application/json'], ['_repr_png_', 'image/png'],
               ['_repr_jpeg_', 'image/jpeg']];
const BINARY = new Set(['image/png', 'image/jpeg']);

// One `_repr_*_` answer as the string a result carries, or undefined to leave the mime type out.
function encodeRepr(mime, out) {
  if (out === null || out === undefined) return undefined;
  if (mime === 'application/json') {
    try {
      const json = JSON.stringify(out);
      return typeof json === 'string' ? json : undefined;
    } catch (e) {
      return undefined;
    }
  }
  // Bytes (of any realm: the code's Uint8Array is not the driver's); a string is base64 already.
  if (BINARY.has(mime) && util.types.isUint8Array(out))
    return Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString('base64');
  if (BINARY.has(mime) && util.types.isAnyArrayBuffer(out)) return Buffer.from(out).toString('base64');
  return typeof out === 'string' ? out : undefined;
}

function formats(value) {
  const data = {
    'text/plain': clip(util.inspect(value, { depth: 4, maxArrayLength: 200, maxStringLength: TEXT_LIMIT })),
  };
  if (typeof value !== 'function' && typeof value !== 'symbol') {
    try {
      const json = JSON.stringify(value);
      if (typeof json === 'string' && json.length <= 4 * TEXT_LIMIT) data['application/json'] = json;
    } catch (e) { /* not JSON-serializable (cycles, BigInt): text/plain only */ }
  }
  // A class's _repr_html_ is a prototype method, not a representation of the class.
  if (value === null || typeof value !== 'object') return data;
  for (const [method, mime] of REPRS) {
    let out;
    try {
      if (typeof value[method] !== 'function') continue;
      out = encodeRepr(mime, value[method]());
    } catch (e) {
      continue;  // a failing _repr_*_ leaves its mime type out, as IPython does
    }
    if (out !== undefined && out.length <= BLOB_LIMIT) data[mime] = out;
  }
  return data;
}

// A value shown as `mime` (display.HTML(...) and friends); `text/plain` is its name, as
// IPython's `<IPython.core.display.HTML object>`.
class Displayable {
  constructor(kind, method, content) {
    this.kind = kind;
    this[method] = () => content;
  }
  [util.inspect.custom]() {
    return `<${this.kind}>`;
  }
  toJSON() {
    return undefined;  // not application/json unless it is display.JSON
  }
}

// display(value, ...): sends each value's result now, in the middle of the run.
function display(...values) {
  if (current === null) return;
  for (const value of values) send({ type: 'result', run: current, data: formats(value) });
}
display.HTML = (html) => new Displayable('HTML', '_repr_html_', String(html));
display.Markdown = (text) => new Displayable('Markdown', '_repr_markdown_', String(text));
display.SVG = (svg) => new Displayable('SVG', '_repr_svg_', String(svg));
display.Latex = (text) => new Displayable('Latex', '_repr_latex_', String(text));
display.JSON = (value) => new Displayable('JSON', '_repr_json_', value);
display.PNG = (bytes) => new Displayable('PNG', '_repr_png_', bytes);
display.JPEG = (bytes) => new Displayable('JPEG', '_repr_jpeg_', bytes);

function errorFrame(run, e) {
  const isError = e !== null && typeof e === 'object' && typeof e.stack === 'string';
  let name = isError ? String(e.name) : 'Uncaught';
  if (isError && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') name = 'Interrupted';
  const value = isError ? String(e.message) : util.inspect(e);
  // The first line and the code's own frames: the driver's and node's internals are not the code's.
  const traceback = isError
      ? e.stack.split('\n').filter((line, i) => i === 0 || line.includes('<cell>')).slice(0, 200).map(clip)
      : [`Uncaught ${value}`];
  return { type: 'error', run, name, value: clip(value), traceback };
}

function awaitInterruptible(promise) {
  return new Promise((resolve, reject) => {
    interruptAwait = () => {
      const e = new Error('Script execution interrupted.');
      e.code = 'ERR_SCRIPT_EXECUTION_INTERRUPTED';
      reject(e);
    };
    promise.then(resolve, reject);
  }).finally(() => { interruptAwait = null; });
}

function isThenable(value) {
  return value !== null && (typeof value === 'object' || typeof value === 'function') &&
         typeof value.then === 'function';
}

// The code as node's REPL would run it when it awaits at top level, else null. Code the
// transform cannot parse is left alone: compiling it as is reports its SyntaxError.
function rewriteTopLevelAwait(code) {
  if (topLevelAwait === null || !code.includes('await')) return null;
  try {
    return topLevelAwait(code);
  } catch (e) {
    return null;
  }
}

async function execute(run, code) {
  current = run;
  const results = [];
  let failure = null;
  let failed = false;
  try {
    const rewritten = rewriteTopLevelAwait(code);
    const script = new vm.Script(rewritten ?? code, { filename: '<cell>' });
    let value = script.runInContext(context, { breakOnSigint: true, displayErrors: false });
    if (rewritten !== null) {
      // The wrapper's promise; it answers {value} when the code ends with an expression.
      const wrapped = await awaitInterruptible(value);
      value = wrapped === undefined ? undefined : wrapped.value;
    }
    if (isThenable(value)) value = await awaitInterruptible(value);
    if (value !== undefined) results.push(formats(value));
  } catch (e) {
    failure = e;
    failed = true;
  }
  for (const data of results) send({ type: 'result', run, data });
  if (failed) send(errorFrame(run, failure));
  send({ type: 'done', run });
  current = null;
}

// Between runs SIGINT does nothing; while a final Promise is awaited it abandons the wait.
process.on('SIGINT', () => { if (interruptAwait) interruptAwait(); });
// The code's own async failures must not end the context: they are the run's stderr.
process.on('uncaughtException', (e) => err.write(`Uncaught ${util.inspect(e)}\n`));
process.on('unhandledRejection', (e) => err.write(`Unhandled rejection ${util.inspect(e)}\n`));

const queue = [];
let buffered = [];
let bufferedBytes = 0;
let busy = false;

async function pump() {
  if (busy) return;
  busy = true;
  while (queue.length) {
    const message = queue.shift();
    if (message.type === 'run') await execute(message.id, message.code);
  }
  busy = false;
}

channel.on('data', (chunk) => {
  buffered.push(chunk);
  bufferedBytes += chunk.length;
  while (bufferedBytes >= 4) {
    let pending = buffered.length === 1 ? buffered[0] : Buffer.concat(buffered);
    buffered = [pending];
    const size = pending.readUInt32BE(0);
    if (size > MAX_IN) process.exit(3);
    if (pending.length < 4 + size) break;
    queue.push(JSON.parse(pending.subarray(4, 4 + size).toString('utf8')));
    pending = pending.subarray(4 + size);
    buffered = pending.length ? [pending] : [];
    bufferedBytes = pending.length;
  }
  pump();
});
channel.on('end', () => process.exit(0));
channel.on('error', () => process.exit(0));

send({ type: 'ready', language: 'javascript', version: process.versions.node });
