"""A TCP proxy on loopback in front of one server (moto's S3 here) that a test can cut or slow.

``cut()`` closes every open connection and answers new ones by closing them at once (a network
partition as the client sees it); ``slow(seconds)`` delays every chunk by that much in both directions
(storage slower than any deadline); ``heal()`` passes traffic again.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self._cut = False
        self._delay = 0.0
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

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

    def heal(self) -> None:
        with self._lock:
            self._cut = False
        self._delay = 0.0

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
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _connect_upstream(self) -> socket.socket | None:
        try:
            return socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
        except OSError:
            return None

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
