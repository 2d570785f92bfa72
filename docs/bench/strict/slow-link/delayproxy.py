# A TCP proxy that delays every chunk by D seconds in each direction, keeping order:
# a link with a fixed one-way latency (what a store in another zone looks like).
import asyncio, sys, time
LISTEN, TARGET, D = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
async def pipe(r, w):
    q = asyncio.Queue()
    async def reader():
        while True:
            b = await r.read(65536)
            await q.put((time.monotonic() + D, b))
            if not b: return
    async def writer():
        while True:
            due, b = await q.get()
            dt = due - time.monotonic()
            if dt > 0: await asyncio.sleep(dt)
            if not b:
                w.close(); return
            w.write(b); await w.drain()
    await asyncio.gather(reader(), writer())
async def handle(cr, cw):
    sr, sw = await asyncio.open_connection('127.0.0.1', TARGET)
    try: await asyncio.gather(pipe(cr, sw), pipe(sr, cw))
    except Exception: pass
async def main():
    s = await asyncio.start_server(handle, '127.0.0.1', LISTEN)
    async with s: await s.serve_forever()
asyncio.run(main())
