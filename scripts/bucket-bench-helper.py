#!/usr/bin/env python3
"""Helpers for scripts/bucket-bench.sh (the bucket mounts side by side).

  proxy LISTEN_PORT UPSTREAM_PORT DELAY_MS COUNT_FILE
      A TCP proxy for HTTP/1.1 on loopback that waits DELAY_MS before
      passing on each request (the first bytes a client sends after the
      server's last answer on that connection) and keeps the number of
      requests seen in COUNT_FILE. Emulates a store's latency for every
      client alike.
  rtt PORT [N]           median milliseconds of N HTTP round trips (any answer)
  freeport               prints a free TCP port on 127.0.0.1
  parquet DIR ROWS_HOT ROWS_BIG
                         writes DIR/hot.parquet (hot columns a, b; cold
                         payload) and DIR/big.parquet (payload only)
  query FILE [COLS]      reads the columns (comma list, or all) with pyarrow;
                         prints seconds
  dontneed FILE...       drops the kernel's page cache of each file (fadvise)
"""
import asyncio
import os
import socket
import statistics
import sys
import time


def freeport():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        print(s.getsockname()[1])


def proxy(listen, upstream, delay_ms, count_file):
    delay = delay_ms / 1000.0
    count = 0
    received = 0
    written = [0.0]

    def save():
        tmp = count_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{count} {received}")
        os.replace(tmp, count_file)

    def bump():
        nonlocal count
        count += 1
        save()

    def add_bytes(n):
        # The bytes the store sent (answers and their headers), saved at
        # most every 50 ms and at each request.
        nonlocal received
        received += n
        now = time.monotonic()
        if now - written[0] > 0.05:
            written[0] = now
            save()

    def log_request(data):
        # The request line and its Range (the start of the request's first
        # read holds both), one line each, in COUNT_FILE.log: which
        # requests a step sent, for a reader of the kept work directory.
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        line = head[0]
        for h in head[1:]:
            if h.lower().startswith("range:"):
                line += " " + h.split(":", 1)[1].strip()
        with open(count_file + ".log", "a") as f:
            f.write(f"{count} {line}\n")

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
                        bump()
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
                    data = await sreader.read(65536)
                    if not data:
                        break
                    state["answered"] = True
                    add_bytes(len(data))
                    cwriter.write(data)
                    await cwriter.drain()
            except OSError:
                pass
            finally:
                cwriter.close()
            save()

        await asyncio.gather(up(), down())
        swriter.close()

    async def main():
        with open(count_file, "w") as f:
            f.write("0 0")
        server = await asyncio.start_server(handle, "127.0.0.1", listen)

        async def flush():
            # What arrived since the last save is on file within 50 ms.
            while True:
                await asyncio.sleep(0.05)
                save()

        asyncio.get_running_loop().create_task(flush())
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def rtt(port, n=50):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(b"GET /bench-rtt-probe HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
        times.append((time.perf_counter() - t) * 1000)
    print(f"{statistics.median(times):.2f}")


def parquet(out_dir, rows_hot, rows_big):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def ints(n):
        return pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(os.urandom(8 * n))])

    def payload(n):
        return pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(256), n, [None, pa.py_buffer(os.urandom(256 * n))])

    hot = pa.table({"a": ints(rows_hot), "b": ints(rows_hot), "payload": payload(rows_hot)})
    pq.write_table(hot, os.path.join(out_dir, "hot.parquet"), compression="none",
                   row_group_size=1 << 20)
    big = pa.table({"id": ints(rows_big), "payload": payload(rows_big)})
    pq.write_table(big, os.path.join(out_dir, "big.parquet"), compression="none",
                   row_group_size=1 << 18)


def query(path, cols=None):
    import pyarrow.parquet as pq
    t = time.perf_counter()
    columns = cols.split(",") if cols else None
    table = pq.read_table(path, columns=columns, use_threads=True, memory_map=False)
    if table.num_rows == 0:
        sys.exit(f"query: {path} has no rows")
    print(f"{time.perf_counter() - t:.3f}")


def dontneed(paths):
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "proxy":
        proxy(int(args[0]), int(args[1]), float(args[2]), args[3])
    elif cmd == "rtt":
        rtt(int(args[0]), int(args[1]) if len(args) > 1 else 50)
    elif cmd == "freeport":
        freeport()
    elif cmd == "parquet":
        parquet(args[0], int(args[1]), int(args[2]))
    elif cmd == "query":
        query(args[0], args[1] if len(args) > 1 else None)
    elif cmd == "dontneed":
        dontneed(args)
    else:
        sys.exit(f"bucket-bench-helper: unknown command {cmd}")
