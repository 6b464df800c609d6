"""A Service in front of a role's replicas: each new connection to the next replica that accepts it.

kube-proxy sends a Service's connections to its ready endpoints; here a replica that is gone refuses
the connection and the next one is tried, so killing one replica leaves the others serving.
"""

from __future__ import annotations

import itertools
import socket
import threading

from tests.support.tcpproxy import TcpProxy


class Balancer(TcpProxy):
    def __init__(self, backends: list[int]) -> None:
        self.backends = list(backends)
        self._turn = itertools.count()
        self._turn_lock = threading.Lock()
        super().__init__(0)

    def _connect_upstream(self) -> socket.socket | None:
        with self._turn_lock:
            first = next(self._turn)
        for offset in range(len(self.backends)):
            port = self.backends[(first + offset) % len(self.backends)]
            try:
                upstream = socket.create_connection(("127.0.0.1", port), timeout=2)
            except OSError:
                continue
            # 2 s to connect, not to answer: a socket keeps its connect timeout, and a replica that took
            # longer to answer (a failover CREATE reading storage) or a keep-alive connection idle for
            # longer had the proxy close both sides: kube-apiserver's "failed calling webhook ... EOF"
            upstream.settimeout(None)
            return upstream
        return None
