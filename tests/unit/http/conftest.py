"""Fixtures shared by the HTTP unit tests."""

from __future__ import annotations

import time

import pytest

import narad.broker.messages as messages_module


class Clock:
    """The broker's "now", in milliseconds, moved by the test."""

    def __init__(self) -> None:
        self.now = int(time.time() * 1000)

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(messages_module, "now_ms", clock)
    return clock
