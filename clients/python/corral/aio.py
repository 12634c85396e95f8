"""asyncio over the same client: each call runs the blocking HTTP exchange in a worker thread
(asyncio.to_thread), so an event loop is never blocked; streams are async iterators, and each open
stream or terminal waits in a thread of its own, so any number of them leave asyncio's few shared
workers free for the other calls.

    async with await AsyncClient().create_session(policy="default") as session:
        print((await session.run("uname -a")).stdout)
        async for event in session.exec("make"):
            ...
        async with await session.terminal() as terminal:
            await terminal.write("exit 3\r")
            print((await terminal.wait()).exit_code)
"""

import asyncio
import inspect
import queue
import threading
import weakref

from .client import Client, Process, Session
from .terminal import Terminal

# The sync methods that answer an iterator of events (each next() blocks on the socket): their
# async counterparts are async iterators, used as ``async for e in session.exec(...)``.
_STREAMS = {"exec", "watch", "stream_code", "stream"}


class _Async:
    """Wraps a sync object: methods become coroutines, iterator-returning ones async iterators."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if not callable(attr):
            return _wrap(attr)
        if name in _STREAMS:
            return lambda *a, **kw: _aiter(attr, *a, **kw)

        async def call(*args, **kwargs):
            result = await asyncio.to_thread(attr, *args, **kwargs)
            return _wrap(result, name)

        return call


class _Waiter:
    """One daemon thread that runs blocking calls for one stream or terminal, one at a time.

    A stream waits on its socket for as long as its process or watch lasts. On asyncio's shared
    pool (min(32, CPUs + 4) workers: 6 on a 2-CPU host) six such waits held every other call of
    the client back until an event came; a thread per stream cannot. A daemon thread, so a stream
    left open does not keep the interpreter from exiting."""

    def __init__(self, name):
        self._calls = queue.SimpleQueue()
        threading.Thread(target=self._serve, name=name, daemon=True).start()

    async def call(self, fn, *args):
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._calls.put((loop, future, fn, args))
        return await future

    def stop(self):
        self._calls.put(None)

    def _serve(self):
        while (call := self._calls.get()) is not None:
            loop, future, fn, args = call
            try:
                outcome = (fn(*args), None)
            except BaseException as e:  # noqa: B902 - handed to the awaiting coroutine
                outcome = (None, e)
            try:
                loop.call_soon_threadsafe(_settle, future, *outcome)
            except RuntimeError:
                pass  # the loop is closed: nobody awaits this any more


def _settle(future, result, error):
    if future.done():
        return  # cancelled meanwhile
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


async def _aiter(make, *args, **kwargs):
    waiter = _Waiter(f"corral-aio-{getattr(make, '__name__', 'stream')}")
    iterator = None
    done = object()
    try:
        iterator = await waiter.call(lambda: make(*args, **kwargs))
        while (item := await waiter.call(next, iterator, done)) is not done:
            yield item
    finally:
        # From this thread, not the waiter's: a next() may still wait there (the task was
        # cancelled); EventStream.close() shuts the socket down, which ends that wait.
        if iterator is not None:
            iterator.close()
        waiter.stop()


def _wrap(result, name=None):
    """The async counterpart of what a sync call answered; a stream never passes unwrapped."""
    if isinstance(result, Client):
        return AsyncClient._of(result)
    if isinstance(result, Session):
        return AsyncSession(result)
    if isinstance(result, Process):
        return AsyncProcess(result)
    if isinstance(result, Terminal):
        return AsyncTerminal(result)
    if name is not None and (inspect.isgenerator(result) or hasattr(result, "__next__")):
        # Iterating it here would block the event loop on every event.
        raise TypeError(f"corral.aio: `{name}` answers a stream but is not in aio._STREAMS")
    return result


class AsyncSession(_Async):
    """A Session whose methods are coroutines (``exec``, ``watch``, ``stream_code``: async
    iterators of events; ``terminal``, ``attach_terminal``: an AsyncTerminal)."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.end()


class AsyncProcess(_Async):
    """A Process whose methods are coroutines (``stream``: an async iterator of events);
    ``exit_code`` is read from the record it holds, as in Process."""


class AsyncTerminal(_Async):
    """A Terminal whose methods are coroutines (``write``, ``read``, ``read_until``, ``resize``,
    ``wait``, ``close``) and whose output is an async iterator of bytes; ``async with`` detaches
    on exit. Each ``read`` waits in a worker thread, never on the event loop."""

    def __init__(self, target):
        super().__init__(target)
        self._waiter = _Waiter(f"corral-aio-terminal-{target.id}")  # for read, read_until, wait
        weakref.finalize(self, self._waiter.stop)

    async def read(self, timeout=None):
        return await self._waiter.call(self._target.read, timeout)

    async def read_until(self, marker, timeout=30):
        return await self._waiter.call(self._target.read_until, marker, timeout)

    async def wait(self, timeout=None):
        return await self._waiter.call(self._target.wait, timeout)

    def __aiter__(self):
        return self._chunks()

    async def _chunks(self):
        while chunk := await self.read():
            yield chunk

    async def close(self, timeout=5):
        """Detaches; a read or wait waiting meanwhile ends (b"", or CorralError ``detached``)."""
        await asyncio.to_thread(self._target.close, timeout)

    @property
    def exit_code(self):
        """An awaitable of the exit code (``await terminal.exit_code``): the sync property waits
        for the process."""
        return self.wait_exit_code()

    async def wait_exit_code(self, timeout=None):
        """The exit code once the process ended (what ``(await wait(timeout)).exit_code`` is)."""
        return (await self.wait(timeout)).exit_code

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()


class AsyncClient(_Async):
    """A Client whose methods are coroutines; sessions and processes come back async too."""

    def __init__(self, *args, **kwargs):
        super().__init__(Client(*args, **kwargs))

    @classmethod
    def _of(cls, client):
        wrapped = cls.__new__(cls)
        _Async.__init__(wrapped, client)
        return wrapped
