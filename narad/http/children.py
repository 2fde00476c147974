"""``/v1/topics/{parent}/children``: attach, list with lag, detach.

Attaching and detaching manage the parent: they take its owner or an admin
matching it. An attach also changes the child (its schema and messages come
from the parent from then on), so it takes the right to alter the child too.
Listing the children reads the parent.
"""

from __future__ import annotations

import falcon

from narad.broker.children import ChildLag
from narad.broker.children import ChildrenService
from narad.http import dumps
from narad.http.body import read_object
from narad.http.body import refuse_unknown
from narad.http.topics import check_name
from narad.http.topics import delay_ms
from narad.http.topics import topic_name
from narad.http.topics import topic_record
from narad.security.access import authorize
from narad.security.access import confirm_read
from narad.security.grants import Action

ATTACH_FIELDS = ("child", "delay_ms")


class Children:
    def __init__(self, children: ChildrenService) -> None:
        self.children = children

    def on_post(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        parent_owned = authorize(req, Action.MANAGE_CHILDREN, check_name(name))
        body, _ = read_object(req)
        refuse_unknown(body, ATTACH_FIELDS)
        child = topic_name(body.get("child"), "child")
        child_owned = authorize(req, Action.ALTER, child)
        delay = body.get("delay_ms")
        delay = 0 if delay is None else delay_ms(delay, "delay_ms")
        parent = self.children.attach(
            name, child, delay, parent_epoch=parent_owned, child_epoch=child_owned
        )
        resp.text = dumps(topic_record(parent))

    def on_get(self, req: falcon.Request, resp: falcon.Response, name: str) -> None:
        owned = authorize(req, Action.READ, check_name(name))
        parent, lags = self.children.children(name)
        confirm_read(req, name, owned)
        resp.text = dumps(
            {"parent": parent.name, "children": [_lag(lag) for lag in lags]}
        )

    on_head = on_get


class Child:
    def __init__(self, children: ChildrenService) -> None:
        self.children = children

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, name: str, child: str
    ) -> None:
        owned = authorize(req, Action.MANAGE_CHILDREN, check_name(name))
        self.children.detach(name, check_name(child), parent_epoch=owned)
        resp.status = falcon.HTTP_204


def _lag(lag: ChildLag) -> dict[str, object]:
    return {
        "name": lag.child.name,
        "delay_ms": lag.child.delay_ms,
        "lag_messages": lag.lag_messages,
        "lag_complete": lag.lag_complete,
    }
