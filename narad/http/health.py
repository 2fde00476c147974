"""Liveness, readiness and metrics."""

from __future__ import annotations

import falcon

from narad import metrics
from narad.http import dumps
from narad.storage import Storage


class Health:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.text = dumps({"status": "ok"})

    on_head = on_get


class Ready:
    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        if self.storage.ping():
            resp.text = dumps({"status": "ready"})
        else:
            resp.status = falcon.HTTP_503
            resp.text = dumps({"error": "storage is not answering"})

    on_head = on_get


class Metrics:
    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        resp.data, resp.content_type = metrics.render()

    on_head = on_get
