"""One S3 endpoint in front of several moto servers, each request forwarded by its bucket: a test harness
part for runs at scale (bench/karmada_fleet.py), where one moto process cannot serve thousands of jobs.

The policy names one endpoint per scheme; the jobs' checkpoint directories are spread over K buckets, each
bucket on its own moto server, and this router (its own process: ``python -m tests.support.s3router
--port P BUCKET=PORT ...``) passes each HTTP/1.1 request of a client's connection to the server of the
request's bucket (path-style addressing, the first path segment: what botocore uses for an IP endpoint),
and the answer back, unchanged (but for ``Expect: 100-continue``, answered by the router itself and
not passed on). A request without a bucket (ListBuckets) goes to the first server.
Bodies are relayed as they come: by Content-Length, chunked, or (an answer) until the server closes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.server import free_port

__all__ = ["s3_router"]

Stream = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _headers(head: bytes) -> tuple[bytes, dict[bytes, bytes]]:
    lines = head.split(b"\r\n")
    fields: dict[bytes, bytes] = {}
    for line in lines[1:]:
        if b":" in line:
            name, value = line.split(b":", 1)
            fields[name.strip().lower()] = value.strip()
    return lines[0], fields


async def _relay_body(
    source: asyncio.StreamReader, sink: asyncio.StreamWriter, fields: dict[bytes, bytes], to_eof: bool
) -> None:
    if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
        while True:
            size_line = await source.readuntil(b"\r\n")
            sink.write(size_line)
            size = int(size_line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    trailer = await source.readuntil(b"\r\n")
                    sink.write(trailer)
                    if trailer == b"\r\n":
                        break
                break
            sink.write(await source.readexactly(size + 2))
            await sink.drain()
    elif b"content-length" in fields:
        left = int(fields[b"content-length"])
        while left > 0:
            chunk = await source.read(min(left, 1 << 16))
            if not chunk:
                raise ConnectionError("body cut short")
            sink.write(chunk)
            left -= len(chunk)
            await sink.drain()
    elif to_eof:
        while chunk := await source.read(1 << 16):
            sink.write(chunk)
            await sink.drain()
    await sink.drain()


class Router:
    def __init__(self, routes: dict[str, int]) -> None:
        self.routes = routes
        self.first = next(iter(routes.values()))

    def port_for(self, target: bytes) -> int:
        path = target.split(b"?", 1)[0]
        if b"://" in path:  # absolute form
            path = b"/" + path.split(b"://", 1)[1].split(b"/", 1)[-1]
        bucket = path.lstrip(b"/").split(b"/", 1)[0].decode(errors="replace")
        return self.routes.get(bucket, self.first)

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backends: dict[int, Stream] = {}
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, fields = _headers(head)
                method, target = request_line.split(b" ", 2)[:2]
                port = self.port_for(target)
                if port not in backends:
                    backends[port] = await asyncio.open_connection("127.0.0.1", port)
                b_reader, b_writer = backends[port]
                if fields.get(b"expect", b"").lower() == b"100-continue":
                    # the client waits for it before its body: answered here, the header not passed on
                    head = b"\r\n".join(
                        line for line in head.split(b"\r\n") if not line.lower().startswith(b"expect:")
                    )
                    writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
                    await writer.drain()
                b_writer.write(head)
                await _relay_body(reader, b_writer, fields, to_eof=False)
                while True:  # interim answers (100 Continue) first
                    answer = await b_reader.readuntil(b"\r\n\r\n")
                    writer.write(answer)
                    status_line, answer_fields = _headers(answer)
                    status = int(status_line.split(b" ", 2)[1])
                    if status >= 200 or status == 101:
                        break
                no_body = method == b"HEAD" or status in (204, 304)
                closing = answer_fields.get(b"connection", b"").lower() == b"close"
                if not no_body:
                    await _relay_body(b_reader, writer, answer_fields, to_eof=True)
                await writer.drain()
                if closing or fields.get(b"connection", b"").lower() == b"close":
                    return
                if not no_body and not (
                    b"content-length" in answer_fields or b"transfer-encoding" in answer_fields
                ):
                    return  # read to the server's close: this client connection ends too
        except (asyncio.IncompleteReadError, ConnectionError, ValueError, IndexError):
            return
        finally:
            for _, b_writer in backends.values():
                b_writer.close()
            writer.close()


async def _main(port: int, routes: dict[str, int]) -> None:
    router = Router(routes)
    server = await asyncio.start_server(router.serve, "127.0.0.1", port, backlog=512)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.s3router")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("routes", nargs="+", help="BUCKET=PORT, the first also for requests without one")
    args = parser.parse_args(argv)
    routes = {r.split("=", 1)[0]: int(r.split("=", 1)[1]) for r in args.routes}
    asyncio.run(_main(args.port, routes))
    return 0


@contextmanager
def s3_router(routes: dict[str, str], log_file: Path) -> Iterator[tuple[str, int]]:
    """The router running in front of ``routes`` (bucket -> a moto server's endpoint) until the block
    ends: its endpoint and pid."""
    from tests.support.repo import REPO
    from tests.support.storage_process import port_accepts, storage_process

    port = free_port()
    argv = [sys.executable, "-m", "tests.support.s3router", "--port", str(port)]
    argv += [f"{bucket}={endpoint.rsplit(':', 1)[1]}" for bucket, endpoint in routes.items()]
    with storage_process("s3 router", argv, log_file, port_accepts(port), cwd=REPO) as process:
        yield f"http://127.0.0.1:{port}", process.pid


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
