"""corral.aio against a real corrald: coroutines and async iterators over the same calls."""

import asyncio
import inspect
import re

from corral import Client, Process, Session, Terminal, aio
from corral.aio import AsyncClient, AsyncSession, AsyncTerminal


def test_async_client_runs_streams_and_spawns(daemon):
    async def main():
        client = AsyncClient(socket_path=daemon.socket_path)
        assert (await client.health())["status"] == "ok"
        async with await client.create_session(policy="default") as a, \
                await client.create_session(policy="default") as b:
            ra, rb = await asyncio.gather(a.run("echo a"), b.run("echo b"))
            assert (ra.stdout, rb.stdout) == ("a\n", "b\n")
            types = [e["type"] async for e in a.exec("echo streamed")]
            assert types[0] == "start" and types[-1] == "exit"
            p = await a.spawn("echo from-spawn")
            await p.wait(timeout_ms=30000)
            assert await p.output() == b"from-spawn\n"
            data = "".join([e.get("data", "") async for e in p.stream() if e["type"] == "stdout"])
            assert data == "from-spawn\n"
    asyncio.run(main())


def _stream_methods(cls):
    """The public methods of a sync class that answer an NDJSON event iterator or a Terminal,
    found from their source, so a new one cannot be missed by the table in corral.aio."""
    found = {"stream": set(), "terminal": set()}
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if name.startswith("_"):
            continue
        source = inspect.getsource(member)
        if "iter_ndjson(" in source:
            found["stream"].add(name)
        if re.search(r"\bTerminal\(", source):
            found["terminal"].add(name)
    return found


def test_every_stream_of_the_sync_client_is_an_async_iterator_in_aio():
    streams = set()
    for cls in (Client, Session, Process, Terminal):
        streams |= _stream_methods(cls)["stream"]
    assert streams == {"exec", "watch", "stream_code", "stream"}, streams
    assert streams == aio._STREAMS
    assert _stream_methods(Session)["terminal"] == {"terminal", "attach_terminal"}


def test_async_streams_and_terminals_never_block_the_event_loop(daemon):
    """Each stream waits ~1 s for its next event; a ticker on the same loop keeps ticking."""
    async def ticking(consume):
        ticks = 0
        finished = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not finished.is_set():
                await asyncio.sleep(0.02)
                ticks += 1
        task = asyncio.create_task(ticker())
        try:
            result = await asyncio.wait_for(consume(), 60)
        finally:
            finished.set()
            await task
        assert ticks >= 15, f"the event loop was blocked: {ticks} ticks in a 1 s wait"
        return result

    async def main():
        client = AsyncClient(socket_path=daemon.socket_path)
        async with await client.create_session(policy="default") as s:
            assert isinstance(s.client, AsyncClient)
            await s.create_context("python", id="py")
            code = "import time; time.sleep(1); print('slept')"
            events = await ticking(lambda: _collect(s.stream_code("py", code)))
            assert [e["type"] for e in events] == ["stdout", "end"], events

            events = await ticking(lambda: _collect(s.exec("sleep 1; echo done")))
            assert events[-1]["type"] == "exit"

            p = await s.spawn("sleep 1; echo late")
            assert isinstance(p.session, AsyncSession)
            events = await ticking(lambda: _collect(p.stream()))
            assert [e.get("data") for e in events if e["type"] == "stdout"] == ["late\n"]

            await s.run("mkdir -p /workspace/watched")

            async def watch_a_late_write():
                watch = s.watch("/workspace/watched")
                assert (await watch.__anext__())["type"] == "watching"
                writer = asyncio.create_task(s.run("sleep 1; echo x > /workspace/watched/f"))
                async for event in watch:
                    if event.get("path") == "/workspace/watched/f":
                        break
                await watch.aclose()
                await writer
            await ticking(watch_a_late_write)

            async def terminal():
                t = await s.terminal(command="sleep 1; echo $((6*7)); exit 3")
                assert isinstance(t, AsyncTerminal)
                output = b"".join([chunk async for chunk in t])
                assert b"42" in output
                assert (await t.wait(30)).exit_code == 3
                assert await t.exit_code == 3
                await t.close()
                async with await s.attach_terminal(t.id) as again:  # the scrollback, then the exit
                    assert b"42" in await again.read_until(b"42", timeout=30)
                    assert (await again.wait(30)).exit_code == 3
            await ticking(terminal)

    asyncio.run(main())


async def _collect(stream):
    return [event async for event in stream]


def test_many_open_async_streams_leave_other_calls_free_and_closing_one_stops_its_command(daemon):
    # asyncio's shared pool has min(32, CPUs + 4) workers: a stream waiting in each held back
    # every other call of the client until an event came.
    async def main():
        client = AsyncClient(socket_path=daemon.socket_path)
        async with await client.create_session(policy="default") as s:
            streams = [s.exec("echo up; sleep 60") for _ in range(40)]
            starts = [await stream.__anext__() for stream in streams]
            assert [(await stream.__anext__())["data"] for stream in streams] == ["up\n"] * 40
            waiting = [asyncio.ensure_future(stream.__anext__()) for stream in streams]
            await asyncio.sleep(0.2)
            assert (await asyncio.wait_for(s.run("echo free"), 20)).stdout == "free\n"

            waiting[0].cancel()  # a cancelled wait, then the stream closed: the command stops
            await asyncio.gather(waiting[0], return_exceptions=True)
            await streams[0].aclose()
            record = await (await s.process(starts[0]["id"])).wait(timeout_ms=20000)
            assert record["finished"] and record["status"] == "killed", record
            for w in waiting[1:]:
                w.cancel()
            await asyncio.gather(*waiting[1:], return_exceptions=True)
            for stream in streams[1:]:
                await stream.aclose()
    asyncio.run(asyncio.wait_for(main(), 120))
