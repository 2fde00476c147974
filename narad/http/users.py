"""``/v1/users``: users, their grants and passwords (admins only, except a
user's own record and own password)."""

from __future__ import annotations

from typing import Any

import falcon

from narad.errors import InvalidArgument
from narad.errors import UserNotFound
from narad.http import dumps
from narad.http.body import param
from narad.http.body import query_int
from narad.http.body import read_object
from narad.http.body import refuse_unknown
from narad.quoting import quote
from narad.security.access import authorize
from narad.security.access import principal
from narad.security.authn import USERNAME
from narad.security.grants import Action
from narad.security.grants import parse_grants
from narad.security.grants import render_grants
from narad.security.grants import shown
from narad.security.passwords import MAX_PASSWORD
from narad.security.passwords import MIN_PASSWORD
from narad.security.users import UserService
from narad.storage import UserRecord

CREATE_FIELDS = ("username", "password", "grants")
PASSWORD_FIELDS = ("password", "current_password")
MAX_PAGE = 1000


def user_record(user: UserRecord) -> dict[str, Any]:
    """A user as the API shows it: no password material."""
    return {
        "username": user.name,
        "grants": render_grants(user.grants),
        "created_at_ms": user.created_ms,
    }


def _password(body: dict[str, Any], name: str, *, low: int = MIN_PASSWORD) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a string")
    if not low <= len(value) <= MAX_PASSWORD:
        raise InvalidArgument(
            f"{name} must be {low} to {MAX_PASSWORD} characters, got {len(value)}"
        )
    try:
        value.encode()
    except UnicodeEncodeError:
        raise InvalidArgument(
            f"{name} holds a lone surrogate, which UTF-8 cannot carry"
        ) from None
    return value


def _username(name: str) -> str:
    """A user name from the path; one no user can have is 404."""
    if USERNAME.fullmatch(name) is None:
        raise UserNotFound(quote(name))
    return name


class UserCollection:
    def __init__(self, users: UserService) -> None:
        self.users = users

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        authorize(req, Action.ADMIN)
        body, _ = read_object(req)
        refuse_unknown(body, CREATE_FIELDS)
        name = body.get("username")
        # "." and ".." are path segments: clients resolve /v1/users/.. away.
        if (
            not isinstance(name, str)
            or USERNAME.fullmatch(name) is None
            or not name.strip(".")
        ):
            raise InvalidArgument(
                "username must be 1 to 64 letters, digits, '.', '_', '@' or '-', "
                f"and not only dots, got {shown(name)}"
            )
        password = _password(body, "password")
        grants = parse_grants(body.get("grants", []))
        user = self.users.create(principal(req), name, password, grants)
        resp.status = falcon.HTTP_201
        resp.location = f"/v1/users/{user.name}"
        resp.text = dumps(user_record(user))

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        authorize(req, Action.ADMIN)
        limit = query_int(req, "limit", low=1, high=MAX_PAGE) or 100
        token = param(req, "page_token") or ""
        if token and USERNAME.fullmatch(token) is None:
            raise InvalidArgument(
                "page_token must be the next_page_token of the previous page, "
                f"got {quote(token)}"
            )
        users, next_token = self.users.list(after=token, limit=limit)
        resp.text = dumps(
            {"users": [user_record(u) for u in users], "next_page_token": next_token}
        )

    on_head = on_get


class UserItem:
    def __init__(self, users: UserService) -> None:
        self.users = users

    def on_get(self, req: falcon.Request, resp: falcon.Response, username: str) -> None:
        if principal(req).name != username:
            authorize(req, Action.ADMIN)
        resp.text = dumps(user_record(self.users.get(_username(username))))

    on_head = on_get

    def on_delete(
        self, req: falcon.Request, resp: falcon.Response, username: str
    ) -> None:
        authorize(req, Action.ADMIN)
        self.users.delete(principal(req), _username(username))
        resp.status = falcon.HTTP_204

    def on_put_grants(
        self, req: falcon.Request, resp: falcon.Response, username: str
    ) -> None:
        authorize(req, Action.ADMIN)
        _username(username)
        body, _ = read_object(req)
        refuse_unknown(body, ("grants",))
        if "grants" not in body:
            raise InvalidArgument("grants is required")
        grants = parse_grants(body["grants"])
        user = self.users.replace_grants(principal(req), username, grants)
        resp.text = dumps(user_record(user))

    def on_put_password(
        self, req: falcon.Request, resp: falcon.Response, username: str
    ) -> None:
        # Anyone may change their own; anyone else's takes an admin.
        if principal(req).name != username:
            authorize(req, Action.ADMIN)
        _username(username)
        body, _ = read_object(req)
        refuse_unknown(body, PASSWORD_FIELDS)
        password = _password(body, "password")
        current = None
        if body.get("current_password") is not None:
            current = _password(body, "current_password", low=0)
        self.users.set_password(principal(req), username, password, current)
        resp.status = falcon.HTTP_204
