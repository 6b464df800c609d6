"""A TCP proxy on loopback in front of one server (moto's S3 here) that a test can cut or slow.

``cut()`` closes every open connection and answers new ones by closing them at once (a network
partition as the client sees it); ``slow(seconds)`` delays every chunk by that much in both directions
(storage slower than any deadline); ``latency(rtt)`` delivers every chunk rtt/2 after it arrived, in
each direction, without delaying the chunks behind it (a network round-trip time: a request and its
answer take one ``rtt`` more, however many packets they are); ``heal()`` passes traffic again.
``tcp_proxy_process`` runs a latency proxy in a process of its own, for benchmarks that measure the CPU
of their own process; its ``recording()`` tells which requests the clients sent while it lasted, when each
arrived and when its answer's last byte came back (``Sent``): what a bare client replays as the store's
floor (``bench verdicts``).
"""

from __future__ import annotations

import multiprocessing
import queue
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Sent:
    """One HTTP request as the proxy saw it: its request line's method and target, its Range header,
    when its first bytes arrived from the client and when its answer's last bytes arrived from the
    server (monotonic, before the added latency), and the connection it came on."""

    method: str
    target: str
    range: str
    started: float
    answered: float
    connection: int
    headers: tuple[tuple[str, str], ...] = ()


class TcpProxy:
    def __init__(
        self, target_port: int, counter: Any = None, events: Any = None, recording: Any = None
    ) -> None:
        """``counter``: a ``multiprocessing.Value`` the requests are counted in (``tcp_proxy_process``);
        ``events``: a queue each request's and answer chunk's arrival is put on while ``recording``
        (a ``multiprocessing.Value``) is set."""
        self.target_port = target_port
        self._counter = counter
        self._events = events
        self._recording = recording
        self._connections = 0
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._cut = False
        self._delay = 0.0
        self._one_way = 0.0
        self._requests = 0  # HTTP requests seen from clients on delayed connections (latency mode)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    @property
    def requests(self) -> int:
        return int(self._counter.value) if self._counter is not None else self._requests

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            doomed = list(self._open)
        for sock in doomed:
            _close(sock)

    def slow(self, seconds: float) -> None:
        self._delay = seconds

    def latency(self, rtt: float) -> None:
        """Connections opened from now on carry ``rtt`` of round-trip time."""
        self._one_way = rtt / 2

    def heal(self) -> None:
        with self._lock:
            self._cut = False
        self._delay = 0.0
        self._one_way = 0.0

    def close(self) -> None:
        self._halt.set()
        self.cut()
        self._thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._halt.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                continue
            with self._lock:
                cut = self._cut
            if cut:
                _close(client)
                continue
            upstream = self._connect_upstream()
            if upstream is None:
                _close(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            one_way = self._one_way
            self._connections += 1
            for source, sink in ((client, upstream), (upstream, client)):
                if one_way:
                    self._delayed(source, sink, one_way, source is client, self._connections)
                else:
                    threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _delayed(
        self, source: socket.socket, sink: socket.socket, one_way: float, counts: bool, connection: int
    ) -> None:
        """A reader stamps each chunk as it arrives, a writer sends it ``one_way`` later."""
        chunks: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()

        def read() -> None:
            try:
                while not self._halt.is_set():
                    data = source.recv(65536)
                    if self._recording is not None and self._recording.value and data:
                        self._events.put((connection, counts, time.monotonic(), data if counts else b""))
                    if counts and data.split(b" ", 1)[0] in _METHODS:
                        if self._counter is not None:
                            with self._counter.get_lock():
                                self._counter.value += 1
                        else:
                            with self._lock:
                                self._requests += 1
                    chunks.put((time.monotonic() + one_way, data))
                    if not data:
                        return
            except OSError:
                chunks.put((time.monotonic(), b""))

        def write() -> None:
            try:
                while True:
                    due, data = chunks.get()
                    pause = due - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    if not data or self._cut:
                        break
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (source, sink):
                    _close(sock)
                    with self._lock:
                        self._open.discard(sock)

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()

    def _connect_upstream(self) -> socket.socket | None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:
            return None
        upstream.settimeout(None)  # 5 s to connect; then as long as the server takes (see balancer.py)
        return upstream

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not self._halt.is_set():
                data = source.recv(65536)
                if not data:
                    break
                if self._delay:
                    time.sleep(self._delay)
                with self._lock:
                    if self._cut:
                        break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                _close(sock)
                with self._lock:
                    self._open.discard(sock)


_METHODS = {b"GET", b"HEAD", b"PUT", b"POST", b"DELETE"}


def _close(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()


@contextmanager
def tcp_proxy(target_port: int) -> Iterator[TcpProxy]:
    proxy = TcpProxy(target_port)
    try:
        yield proxy
    finally:
        proxy.close()


class ProxyProcess:
    """A latency proxy in a process of its own, so that its threads take no CPU (and no GIL) from the
    process measured (``bench verdicts``): ``endpoint`` and ``requests`` as ``TcpProxy``'s."""

    def __init__(self, target_port: int, rtt: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._counter = context.Value("q", 0)
        self._events: Any = context.Queue()
        self._recording = context.Value("b", 0)
        port = context.Value("i", 0)
        ready = context.Event()
        self._process = context.Process(
            target=_serve,
            args=(target_port, rtt, self._counter, port, ready, self._events, self._recording),
            name="tcp-proxy",
            daemon=True,
        )
        self._process.start()
        if not ready.wait(30):
            self._process.kill()
            raise RuntimeError("the proxy process did not start within 30 s")
        self.port = int(port.value)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def requests(self) -> int:
        return int(self._counter.value)

    @contextmanager
    def recording(self) -> Iterator[list[Sent]]:
        """The requests sent while inside, in the list yielded (filled as the block is left)."""
        sent: list[Sent] = []
        self._recording.value = 1
        try:
            yield sent
        finally:
            self._recording.value = 0
            time.sleep(0.2)  # the last answer's chunks, queued after their arrival
            events = []
            with suppress(queue.Empty):
                while True:
                    events.append(self._events.get(timeout=0.2))
            sent.extend(_requests(events))

    def close(self) -> None:
        self._process.kill()
        self._process.join(5)


def _requests(events: list[tuple[int, bool, float, bytes]]) -> list[Sent]:
    """Requests from the chunks a recording saw: a chunk from the client that starts with a method
    starts one; chunks from the server until the next one on that connection are its answer."""
    open_: dict[int, list[Any]] = {}
    done: list[Sent] = []
    for connection, from_client, at, data in sorted(events, key=lambda e: e[2]):
        if from_client:
            head = data.split(b"\r\n")
            method, _, rest = head[0].partition(b" ")
            if method not in _METHODS:
                continue
            if connection in open_:
                done.append(Sent(*open_.pop(connection)))
            span = next(
                (h.split(b":", 1)[1].strip().decode() for h in head[1:] if h.lower().startswith(b"range:")),
                "",
            )
            target = rest.rsplit(b" ", 1)[0].decode()
            open_[connection] = [method.decode(), target, span, at, at, connection]
        elif connection in open_:
            open_[connection][4] = at
    done.extend(Sent(*fields) for fields in open_.values())
    return sorted(done, key=lambda s: s.started)


def _serve(
    target_port: int, rtt: float, counter: Any, port: Any, ready: Any, events: Any, recording: Any
) -> None:
    proxy = TcpProxy(target_port, counter, events, recording)
    proxy.latency(rtt)
    port.value = proxy.port
    ready.set()
    threading.Event().wait()  # until killed


@contextmanager
def tcp_proxy_process(target_port: int, rtt: float) -> Iterator[ProxyProcess]:
    proxy = ProxyProcess(target_port, rtt)
    try:
        yield proxy
    finally:
        proxy.close()
