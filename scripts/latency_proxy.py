"""A TCP proxy that adds a fixed latency to every request: what an object store across a
network costs per request, on one machine (scripts/bench_object_store.sh).

    python3 scripts/latency_proxy.py LISTEN_PORT UPSTREAM_PORT LATENCY_MS

Each chunk a client sends (an HTTP request: its head, and its body when it has one) is
held LATENCY_MS before it goes upstream, so every request waits that long before the
server sees it, connections in parallel each on their own. Replies pass straight back.
Standard library only.
"""
import asyncio
import sys


async def pump(reader, writer, delay):
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                break
            if delay:
                await asyncio.sleep(delay)
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


async def main(listen, upstream, delay):
    async def handle(c_reader, c_writer):
        try:
            u_reader, u_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(
            pump(c_reader, u_writer, delay), pump(u_reader, c_writer, 0)
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    listen, upstream, latency_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    asyncio.run(main(listen, upstream, latency_ms / 1000.0))
