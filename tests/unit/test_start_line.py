"""narad.serve.server: the master's start line names the address served,
although with ``reuse_port`` it holds no socket of its own."""

from __future__ import annotations

import pytest
from gunicorn.config import Config
from gunicorn.glogging import Logger

from narad.serve.server import LISTENING
from narad.serve.server import GunicornLogger
from narad.serve.server import listening_at


def gunicorn_config(*binds: str, certfile: str | None = None) -> Config:
    cfg = Config()
    cfg.set("bind", list(binds))
    cfg.set("certfile", certfile)
    return cfg


@pytest.mark.parametrize(
    ("binds", "certfile", "named"),
    [
        (["127.0.0.1:7942"], None, "http://127.0.0.1:7942"),
        (["127.0.0.1:7942"], "node.pem", "https://127.0.0.1:7942"),
        (["[::1]:7942"], None, "http://[::1]:7942"),
        (["unix:/run/narad.sock"], None, "unix:/run/narad.sock"),
        (["0.0.0.0:80", "[::]:80"], None, "http://0.0.0.0:80,http://[::]:80"),
    ],
)
def test_the_addresses_are_named_as_gunicorn_names_its_sockets(binds, certfile, named):
    assert listening_at(gunicorn_config(*binds, certfile=certfile)) == named


def said(monkeypatch, cfg: Config, msg: str, *args) -> tuple:
    """What ``GunicornLogger.info(msg, *args)`` hands gunicorn's logger."""
    lines = []
    monkeypatch.setattr(Logger, "info", lambda self, m, *a, **k: lines.append((m, a)))
    logger = GunicornLogger.__new__(GunicornLogger)
    logger.cfg = cfg
    logger.info(msg, *args)
    return lines[0]


def test_the_start_line_names_the_bind_the_master_holds_no_socket_for(monkeypatch):
    cfg = gunicorn_config("127.0.0.1:7942")
    assert said(monkeypatch, cfg, LISTENING, "", 4242) == (
        LISTENING,
        ("http://127.0.0.1:7942", 4242),
    )


def test_other_lines_and_a_master_with_sockets_are_left_as_gunicorn_says(
    monkeypatch,
):
    cfg = gunicorn_config("127.0.0.1:7942")
    assert said(monkeypatch, cfg, LISTENING, "unix:/a.sock", 1) == (
        LISTENING,
        ("unix:/a.sock", 1),
    )
    assert said(monkeypatch, cfg, "Booting worker with pid: %s", 7) == (
        "Booting worker with pid: %s",
        (7,),
    )
