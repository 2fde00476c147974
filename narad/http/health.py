"""Liveness, readiness and metrics."""

from __future__ import annotations

import falcon

from narad import metrics
from narad.storage import Storage


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.media = {"status": "ok"}


class Ready:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.storage.ping():
            resp.media = {"status": "ready"}
        else:
            resp.status = falcon.HTTP_503
            resp.media = {"error": "storage is not answering"}


class Metrics:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data, resp.content_type = metrics.render()
