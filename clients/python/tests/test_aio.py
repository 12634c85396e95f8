"""corral.aio against a real corrald: coroutines and async iterators over the same calls."""

import asyncio

from corral.aio import AsyncClient


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
