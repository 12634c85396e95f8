# corral's Python code-context driver (issue 14). corrald starts it as `python3 -u -`, this file
# on its stdin, inside the sandbox, with fd 3 a socket to the daemon. It speaks length-prefixed JSON frames
# (4-byte big-endian length, then UTF-8 JSON) over that socket, never over stdout/stderr:
#   daemon -> driver  {"type":"run","id":N,"code":"..."}
#   driver -> daemon  {"type":"ready","language":"python","version":"3.11.2"}
#                     {"type":"stdout"|"stderr","run":N,"text":"..."}
#                     {"type":"result","run":N,"data":{"text/plain":"...",...}}
#                     {"type":"error","run":N,"name":"...","value":"...","traceback":["..."]}
#                     {"type":"done","run":N}
# The user code's own sys.stdout/sys.stderr writes are wrapped into stdout/stderr frames; what a
# child process writes to fd 1/2 goes to the context process's own log. SIGINT interrupts the
# running code (KeyboardInterrupt) and is ignored between runs. The daemon repeats SIGINT until
# the run ends (one that came before the code started was lost); the repeats of a run that was
# already interrupted are ignored, so they never hit the code's own clean-up or the driver's.
import ast
import base64
import builtins
import json
import os
import signal
import struct
import sys
import threading
import traceback
import types

_MAX_IN = 64 << 20      # largest run frame accepted from the daemon
_CHUNK = 64 << 10       # characters per stdout/stderr frame
_TEXT_LIMIT = 1 << 20   # characters of one text/plain (or other text) result
_BLOB_LIMIT = 4 << 20   # characters of one encoded result (image/png base64, html)

# The channel moves off fd 3 to a close-on-exec descriptor, so the code's child processes do not
# inherit it and fd 3 is free for the code.
_CH = os.dup(3)
os.close(3)
_lock = threading.RLock()
_run = None              # id of the run in progress, None between runs
_in_user = False         # SIGINT raises only while the code (or its repr) runs
_sending = False         # ...and never in the middle of a frame
_interrupt_pending = False
_interrupted_run = None  # the run a KeyboardInterrupt was raised in: SIGINT repeats are ignored
_main = threading.main_thread()


def _write_all(data):
    view = memoryview(data)
    while view:
        n = os.write(_CH, view)
        view = view[n:]


def _send(obj):
    global _sending, _interrupt_pending
    data = json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")
    with _lock:
        _sending = True
        try:
            _write_all(struct.pack(">I", len(data)) + data)
        finally:
            _sending = False
    if _interrupt_pending and _in_user and threading.current_thread() is _main:
        _interrupt_pending = False
        _raise_interrupt()


def _read_exact(n):
    parts = []
    while n:
        chunk = os.read(_CH, min(n, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _receive():
    header = _read_exact(4)
    if header is None:
        return None
    (size,) = struct.unpack(">I", header)
    if size > _MAX_IN:
        raise SystemExit("corral driver: frame of %d bytes from the daemon" % size)
    body = _read_exact(size)
    return None if body is None else json.loads(body.decode("utf-8"))


class _Stream:
    """sys.stdout / sys.stderr while the driver runs: text goes out as frames of the run."""

    def __init__(self, name):
        self.name = name
        self._parts = []
        self._size = 0
        self.encoding = "utf-8"
        self.errors = "replace"

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not %s" % type(text).__name__)
        with _lock:
            if _run is None:
                return len(text)  # a thread writing between runs: nobody to give it to
            self._parts.append(text)
            self._size += len(text)
            if "\n" in text or self._size >= _CHUNK:
                self.flush()
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        with _lock:
            if not self._parts:
                return
            text = "".join(self._parts)
            self._parts = []
            self._size = 0
            if _run is None:
                return
            for start in range(0, len(text), _CHUNK):
                _send({"type": self.name, "run": _run, "text": text[start:start + _CHUNK]})

    def isatty(self):
        return False

    def writable(self):
        return True

    def readable(self):
        return False

    def fileno(self):
        import io
        raise io.UnsupportedOperation("fileno")


def _raise_interrupt():
    global _interrupted_run
    _interrupted_run = _run
    raise KeyboardInterrupt


def _on_sigint(signum, frame):
    global _interrupt_pending
    if not _in_user or _interrupted_run == _run:
        return
    if _sending:
        _interrupt_pending = True
        return
    _raise_interrupt()


def _clip(text, limit):
    return text if len(text) <= limit else text[:limit] + "...[%d more characters]" % (len(text) - limit)


def _formats(value):
    """The mime bundle of a final expression value, like a notebook cell's."""
    data = {"text/plain": _clip(repr(value), _TEXT_LIMIT)}
    if isinstance(value, type):
        return data  # a class's _repr_html_ is an unbound function
    for method, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                         ("_repr_svg_", "image/svg+xml"), ("_repr_latex_", "text/latex"),
                         ("_repr_json_", "application/json"), ("_repr_png_", "image/png"),
                         ("_repr_jpeg_", "image/jpeg")):
        shown = getattr(value, method, None)
        if not callable(shown):
            continue
        try:
            out = shown()
        except Exception:
            continue
        if isinstance(out, tuple) and out:
            out = out[0]
        if out is None:
            continue
        if mime == "application/json":
            try:
                out = json.dumps(out)
            except (TypeError, ValueError):
                continue
        elif isinstance(out, (bytes, bytearray)):
            out = base64.b64encode(bytes(out)).decode("ascii")
        elif not isinstance(out, str):
            continue
        if len(out) <= _BLOB_LIMIT:
            data[mime] = out
    return data


def _figures():
    """PNGs of the matplotlib figures the code left open (closed afterwards)."""
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return []
    import io
    images = []
    for number in pyplot.get_fignums():
        buffer = io.BytesIO()
        pyplot.figure(number).savefig(buffer, format="png")
        images.append({"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                       "text/plain": "<Figure %d>" % number})
    pyplot.close("all")
    return images


def _error_frame(run, error):
    # Frames of the driver itself (`python3 -` names them "<stdin>") are not the code's.
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename != "<stdin>"]
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):\n")
        lines.extend(traceback.format_list(frames))
    lines.extend(traceback.format_exception_only(type(error), error))
    return {"type": "error", "run": run, "name": type(error).__name__,
            "value": _clip(str(error), _TEXT_LIMIT),
            "traceback": [_clip(line, _TEXT_LIMIT) for line in lines[:200]]}


_namespace = None


def _execute(run, code):
    global _run, _in_user
    with _lock:
        _run = run
    results = []
    failure = None
    try:
        try:
            _in_user = True
            tree = ast.parse(code, "<cell>", "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), _namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), _namespace)
                if value is not None:
                    _namespace["_"] = value
                    results.append(_formats(value))
            results = _figures() + results
        finally:
            _in_user = False
    except BaseException as error:  # KeyboardInterrupt and SystemExit included: the context lives
        failure = error
    with _lock:
        sys.stdout.flush()
        sys.stderr.flush()
        for data in results:
            _send({"type": "result", "run": run, "data": data})
        if failure is not None:
            _send(_error_frame(run, failure))
        _send({"type": "done", "run": run})
        _run = None


def _main_loop():
    global _namespace
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    _namespace = module.__dict__
    os.environ.setdefault("MPLBACKEND", "Agg")
    sys.stdout = _Stream("stdout")
    sys.stderr = _Stream("stderr")
    signal.signal(signal.SIGINT, _on_sigint)
    _send({"type": "ready", "language": "python", "version": sys.version.split()[0]})
    while True:
        message = _receive()
        if message is None:
            os._exit(0)  # the daemon closed the channel: the context is over
        if message.get("type") == "run":
            _execute(message["id"], message["code"])


_main_loop()
