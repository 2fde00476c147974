"""A scripted RESP server: answers each EVALSHA with the next canned reply."""

from __future__ import annotations

import socket
import socketserver
import threading


def _read_command(stream) -> list[bytes] | None:
    line = stream.readline()
    if not line:
        return None
    assert line.startswith(b"*"), line
    parts = []
    for _ in range(int(line[1:])):
        size = int(stream.readline()[1:])
        parts.append(stream.read(size + 2)[:-2])
    return parts


#: A reply never sent.
HANG = b""


class ScriptedServer:
    """Replies come from ``replies``: raw RESP bytes, ``None`` to drop the link,
    or :data:`HANG` never to answer (a frozen node keeping its port open).

    ``INFO`` answers ``info`` (the text of its sections).
    """

    def __init__(self, replies: list[bytes | None], info: str = "") -> None:
        self.replies = list(replies)
        self.info = info
        self.seen: list[str] = []
        self.closed = threading.Event()
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while True:
                    command = _read_command(self.rfile)
                    if command is None:
                        return
                    name = command[0].upper().decode()
                    if name == "PING":  # redis-py's health check wants PONG
                        self.wfile.write(b"+PONG\r\n")
                        continue
                    if name == "INFO":
                        text = outer.info.replace("\n", "\r\n").encode()
                        self.wfile.write(b"$%d\r\n%s\r\n" % (len(text), text))
                        continue
                    if name not in ("EVALSHA", "EVAL", "GET"):
                        self.wfile.write(b"+OK\r\n")
                        continue
                    outer.seen.append(name)
                    reply = outer.replies.pop(0) if outer.replies else b":0\r\n"
                    if reply is None:
                        self.request.shutdown(socket.SHUT_RDWR)
                        return
                    if reply == HANG:
                        outer.closed.wait()
                        return
                    self.wfile.write(reply)

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(
            target=self.server.serve_forever, args=(0.05,), daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self.closed.set()
        self.server.shutdown()
        self.server.server_close()
