"""What gunicorn loads in each worker: ``'narad.serve.wsgi:get_app()'``.

It builds the app with the settings the master runs with
(:func:`narad.serve.server.node_config`), not the file as it is now. Each
worker builds its own storage client, so no connection crosses a fork.
"""

from __future__ import annotations

from narad.app import NaradApp
from narad.app import create_app
from narad.serve.server import node_config


def get_app() -> NaradApp:
    """The gunicorn entry point: the app on the master's settings."""
    return create_app(node_config())
