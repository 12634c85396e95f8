"""asyncio over the same client: each call runs the blocking HTTP exchange in a worker thread
(asyncio.to_thread), so an event loop is never blocked; streams are async iterators.

    async with await AsyncClient().create_session(policy="default") as session:
        print((await session.run("uname -a")).stdout)
"""

import asyncio

from .client import Client

_STREAMS = {"exec", "watch"}


class _Async:
    """Wraps a sync object: methods become coroutines, iterator-returning ones async iterators."""

    def __init__(self, target):
        self._target = target

    def __getattr__(self, name):
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr
        if name in _STREAMS:
            return lambda *a, **kw: _aiter(attr, *a, **kw)

        async def call(*args, **kwargs):
            result = await asyncio.to_thread(attr, *args, **kwargs)
            return _wrap(result)

        return call


async def _aiter(make, *args, **kwargs):
    iterator = await asyncio.to_thread(make, *args, **kwargs)
    done = object()
    try:
        while (item := await asyncio.to_thread(next, iterator, done)) is not done:
            yield item
    finally:
        await asyncio.to_thread(iterator.close)


def _wrap(result):
    from .client import Process, Session
    if isinstance(result, Session):
        return AsyncSession(result)
    if isinstance(result, Process):
        return AsyncProcess(result)
    return result


class AsyncSession(_Async):
    """A Session whose methods are coroutines (``exec``/``watch``: async iterators of events)."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.end()


class AsyncProcess(_Async):
    """A Process whose methods are coroutines (``stream``: an async iterator of events)."""

    def stream(self, *args, **kwargs):
        return _aiter(self._target.stream, *args, **kwargs)


class AsyncClient(_Async):
    """A Client whose methods are coroutines; sessions and processes come back async too."""

    def __init__(self, *args, **kwargs):
        super().__init__(Client(*args, **kwargs))
