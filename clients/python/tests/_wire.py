"""A raw TCP listener for the transport tests: NOT a stand-in for shredd
(the API tests run against the real binary). It exists to make the network
misbehave in ways a healthy shredd never does: accept and never answer,
hang up at once, or answer what a proxy in front of shredd would (a 502
page, a 503, a redirect), and to count the connections a client makes."""

from __future__ import annotations

import socket
import threading
from typing import Optional


class Listener:
    """Listener accepts on 127.0.0.1 and, per connection, does one of:
    ``hang`` (reads and never answers), ``close`` (hangs up at once), or
    answers ``response`` (raw HTTP bytes)."""

    def __init__(self, mode: str, response: bytes = b"") -> None:
        self.mode = mode
        self.response = response
        self.connections = 0
        self.requests = []  # the request bytes read, per connection
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.1)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._held = []
        self._t = threading.Thread(target=self._serve, daemon=True)
        self._t.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            if self.mode == "close":
                conn.close()
                continue
            conn.settimeout(2)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except socket.timeout:
                pass
            self.requests.append(data)
            if self.mode == "hang":
                self._held.append(conn)
                continue
            try:
                conn.sendall(self.response)
            finally:
                conn.close()

    def close(self) -> None:
        self._stop.set()
        self.sock.close()
        for c in self._held:
            c.close()
        self._t.join(2)


def http_response(status: int, reason: str, body: bytes, content_type: str = "text/html",
                  extra: Optional[str] = None) -> bytes:
    head = "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n" % (
        status, reason, content_type, len(body))
    if extra:
        head += extra + "\r\n"
    return head.encode("ascii") + b"\r\n" + body
