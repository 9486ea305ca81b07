"""The latency proxy both benchmark scripts put between their clients and
the S3 server (scripts/bucket-bench-helper.py, scripts/scale-bench-helper.py
import it from here):

  freeport()                          prints a free TCP port on 127.0.0.1
  proxy(LISTEN, UPSTREAM, MS, COUNTS) a TCP proxy for HTTP/1.1 on loopback
      that waits MS ms before passing on each request (the first bytes a
      client sends after the server's last answer on that connection), so
      every client gets the same first-byte latency. COUNTS (JSON, saved
      at least every 50 ms) holds the requests, the object GETs among them
      (`is_object_get`) and the bytes the store answered; COUNTS.log one
      line per request (its number, the Unix time it arrived in ms, request
      line and Range).
  rtt(PORT, N)                        prints the median round trip of N
      HTTP requests, in ms (any answer)
"""
import asyncio
import json
import os
import socket
import statistics
import time


def is_object_get(method, target):
    """True for a GetObject: a GET of `/BUCKET/KEY` with a key (path-style,
    as every client here addresses the store), whatever its query (some
    clients add `x-id=GetObject`). Listings are GETs of the bucket itself,
    `/BUCKET` or `/BUCKET/`, with ListObjects' query (v1: `prefix=`,
    `delimiter=`; v2: `list-type=2`); they are not object GETs, and nor is
    ListParts (`/BUCKET/KEY?uploadId=`). The one rule
    for the proxy's `gets` and for scale-bench-helper.py's request logs.

    >>> is_object_get("GET", "/tpch/lineitem/part-0.parquet")
    True
    >>> is_object_get("GET", "/tpch/a.parquet?x-id=GetObject")
    True
    >>> is_object_get("GET", "/tpch?list-type=2&prefix=lineitem%2F")
    False
    >>> is_object_get("GET", "/tpch/?delimiter=%2F&max-keys=1000&prefix=")
    False
    >>> is_object_get("GET", "/tpch?delimiter=%2F&max-keys=1000&prefix=x")
    False
    >>> is_object_get("GET", "/tpch/k?uploadId=2&max-parts=100")
    False
    >>> is_object_get("HEAD", "/tpch/lineitem/part-0.parquet")
    False
    >>> is_object_get("GET", "http://127.0.0.1:3900/tpch/k")
    True
    """
    if method != "GET":
        return False
    path, _, query = target.partition("?")
    if "uploadId=" in query:
        return False
    if "://" in path:
        path = "/" + path.split("://", 1)[1].partition("/")[2]
    bucket, _, key = path.lstrip("/").partition("/")
    return bool(bucket) and bool(key)


def freeport():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])


def proxy(listen, upstream, delay_ms, counts_file):
    delay = delay_ms / 1000.0
    # requests: every request; gets: GETs of an object (data, not a
    # listing); bytes: what the store sent back.
    counts = {"requests": 0, "gets": 0, "bytes": 0}
    last_write = [0.0]

    def save(force=False):
        now = time.monotonic()
        if not force and now - last_write[0] < 0.05:
            return
        last_write[0] = now
        tmp = counts_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(counts, f)
        os.replace(tmp, counts_file)

    def log_request(data):
        # The request line and its Range, one line each in COUNTS.log: which
        # requests a step sent, for a reader of the kept work directory.
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        line = head[0]
        for h in head[1:]:
            if h.lower().startswith("range:"):
                line += " " + h.split(":", 1)[1].strip()
        with open(counts_file + ".log", "a") as f:
            f.write(f"{counts['requests']} {time.time() * 1000:.1f} {line}\n")

    async def handle(creader, cwriter):
        try:
            sreader, swriter = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            cwriter.close()
            return
        state = {"answered": True}

        async def up():
            try:
                while True:
                    data = await creader.read(65536)
                    if not data:
                        break
                    if state["answered"]:
                        state["answered"] = False
                        counts["requests"] += 1
                        line = data.split(b"\r\n", 1)[0].decode("latin-1").split()
                        if len(line) >= 2 and is_object_get(line[0], line[1]):
                            counts["gets"] += 1
                        save(force=True)
                        log_request(data)
                        if delay:
                            await asyncio.sleep(delay)
                    swriter.write(data)
                    await swriter.drain()
            except OSError:
                pass
            finally:
                try:
                    swriter.write_eof()
                except OSError:
                    pass

        async def down():
            try:
                while True:
                    data = await sreader.read(262144)
                    if not data:
                        break
                    state["answered"] = True
                    counts["bytes"] += len(data)
                    save()
                    cwriter.write(data)
                    await cwriter.drain()
            except OSError:
                pass
            finally:
                save(force=True)
                cwriter.close()

        await asyncio.gather(up(), down())
        swriter.close()

    async def main():
        save(force=True)
        server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=1024)

        async def flush():
            # What arrived since the last save is on file within 50 ms.
            while True:
                await asyncio.sleep(0.05)
                save(force=True)

        asyncio.get_running_loop().create_task(flush())
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def rtt(port, n=50):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /rtt-probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
        times.append((time.perf_counter() - t) * 1000)
    print(f"{statistics.median(times):.2f}")
