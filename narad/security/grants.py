"""Grants: what a user may do, and on which topics.

A grant is an action (``produce``, ``consume``, ``create``, ``admin``) and
topic-name patterns: an exact name (``invoices.eu``) or a prefix followed by
``*`` (``invoices.*``; ``*`` alone is every name). ``admin`` includes every
other action on the topics it matches, ownership rights included; ``admin``
on ``*`` makes a full admin, the kind the node keeps at least one of.

``metrics`` is the node's, not a topic's: it lets a scraper read
``/metrics`` (every topic's series and the node's), nothing else, and its
only pattern is ``*``. A full admin may read ``/metrics`` too.

:class:`Permissions` is a user's grants compiled for the questions asked on
every request (does a grant of this action match this topic?) and for the
ones the Users API asks (do my grants cover the ones I hand out?).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from collections.abc import Sequence
from enum import Enum
from numbers import Number
from typing import Any

from narad.errors import InvalidArgument
from narad.quoting import quote
from narad.storage import Grant

MAX_GRANTS = 64
MAX_PATTERNS = 256  # in all of a user's grants: a listing looks up each range
_PATTERN = re.compile(r"[A-Za-z0-9._-]{0,248}\*|[A-Za-z0-9._-]{1,249}")
GRANT_FIELDS = ("action", "patterns")


class Action(Enum):
    """What a request does to a topic (or to users), as authorization sees it.

    The first five are the actions a grant names. The others are derived:
    ``read`` needs any topic grant matching the topic (or owning it);
    ``alter``, ``delete`` and ``manage_children`` need ownership of the topic
    or an admin grant matching it; ``admin`` (users) needs an admin grant.
    ``metrics`` (reading ``/metrics``) names no topic: it needs a metrics
    grant or admin on ``*``.
    """

    PRODUCE = "produce"
    CONSUME = "consume"
    CREATE = "create"
    ADMIN = "admin"
    METRICS = "metrics"
    READ = "read"
    ALTER = "alter"
    DELETE = "delete"
    MANAGE_CHILDREN = "manage_children"

    @property
    def words(self) -> str:
        """The action as a 403 names it: ``user bob may not <words> topic t``."""
        return _WORDS[self]


GRANTED = (Action.PRODUCE, Action.CONSUME, Action.CREATE, Action.ADMIN, Action.METRICS)
#: The grants that are about topics: the ones that let a user see a topic.
TOPIC_ACTIONS = frozenset(
    a.value for a in (Action.PRODUCE, Action.CONSUME, Action.CREATE, Action.ADMIN)
)
OWNER_ACTIONS = frozenset({Action.ALTER, Action.DELETE, Action.MANAGE_CHILDREN})

_WORDS = {
    Action.PRODUCE: "produce to",
    Action.CONSUME: "consume from",
    Action.CREATE: "create",
    Action.ADMIN: "administer",
    Action.METRICS: "read the metrics of",
    Action.READ: "read",
    Action.ALTER: "alter",
    Action.DELETE: "delete",
    Action.MANAGE_CHILDREN: "manage the fan-out children of",
}


def shown(value: Any) -> str:
    """A client's value in a message: a string quoted, else its JSON type."""
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, Number):
        return "a number"
    if isinstance(value, list):
        return "a list"
    return "an object" if isinstance(value, dict) else "null"


def pattern_covers(held: str, wanted: str) -> bool:
    """Whether every name ``wanted`` matches is matched by ``held``."""
    if held.endswith("*"):
        return wanted.startswith(held[:-1])
    return held == wanted


def parse_grants(value: Any, where: str = "grants") -> tuple[Grant, ...]:
    """Grants from a JSON body: ``[{"action": ..., "patterns": [...]}, ...]``.

    Patterns are kept in the order given, without repeats; grants of the same
    action are merged.

    Raises:
        InvalidArgument: naming the first thing wrong.
    """
    if not isinstance(value, list):
        raise InvalidArgument(f'{where} must be a list of {{"action", "patterns"}}')
    if len(value) > MAX_GRANTS:
        raise InvalidArgument(
            f"{where} holds {len(value)} grants; at most {MAX_GRANTS}"
        )
    merged: dict[str, list[str]] = {}
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise InvalidArgument(f'{at} must be an object {{"action", "patterns"}}')
        unknown = sorted(set(item) - set(GRANT_FIELDS))
        if unknown:
            raise InvalidArgument(f"{at}: unknown field {quote(unknown[0])}")
        action = item.get("action")
        # A list or object is no action (and, unhashable, no set member).
        if not isinstance(action, str) or action not in {a.value for a in GRANTED}:
            raise InvalidArgument(
                f"{at}.action must be one of produce, consume, create, admin, "
                f"metrics; got {shown(action)}"
            )
        patterns = item.get("patterns")
        if not isinstance(patterns, list) or not patterns:
            raise InvalidArgument(f"{at}.patterns must be a non-empty list of names")
        if action not in TOPIC_ACTIONS and any(p != "*" for p in patterns):
            raise InvalidArgument(
                f"{at}: a {action} grant is the whole node's: "
                'its patterns must be ["*"]'
            )
        for j, pattern in enumerate(patterns):
            if not isinstance(pattern, str) or not _PATTERN.fullmatch(pattern):
                raise InvalidArgument(
                    f"{at}.patterns[{j}] must be a topic name or a prefix "
                    f"followed by * (such as invoices.*), got {shown(pattern)}"
                )
        held = merged.setdefault(action, [])
        held.extend(p for p in patterns if p not in held)
        total = sum(len(ps) for ps in merged.values())
        if total > MAX_PATTERNS:
            raise InvalidArgument(
                f"{where} hold {total} patterns; at most {MAX_PATTERNS} in all"
            )
    return tuple(Grant(action, tuple(patterns)) for action, patterns in merged.items())


def render_grants(grants: Iterable[Grant]) -> list[dict[str, Any]]:
    """Grants as the API shows them."""
    return [{"action": g.action, "patterns": list(g.patterns)} for g in grants]


class Permissions:
    """A user's grants, compiled.

    Attributes:
        grants: The grants as stored.
        admin: The user holds an ``admin`` grant (of any pattern): they may
            use the Users API, within what they hold.
        full_admin: The user holds ``admin`` on ``*``.
    """

    __slots__ = ("_exact", "_prefixes", "admin", "full_admin", "grants")

    def __init__(self, grants: Sequence[Grant]) -> None:
        self.grants = tuple(grants)
        self._exact: dict[str, frozenset[str]] = {}
        self._prefixes: dict[str, tuple[str, ...]] = {}
        for grant in self.grants:
            exact = {p for p in grant.patterns if not p.endswith("*")}
            prefixes = [p[:-1] for p in grant.patterns if p.endswith("*")]
            self._exact[grant.action] = (
                self._exact.get(grant.action, frozenset()) | exact
            )
            self._prefixes[grant.action] = (
                *self._prefixes.get(grant.action, ()),
                *prefixes,
            )
        self.admin = Action.ADMIN.value in self._exact or bool(
            self._prefixes.get(Action.ADMIN.value)
        )
        self.full_admin = "" in self._prefixes.get(Action.ADMIN.value, ())

    @classmethod
    def everything(cls) -> Permissions:
        """Admin on every topic: what a request has while security is off."""
        return cls([Grant(Action.ADMIN.value, ("*",))])

    def _matches(self, action: str, topic: str) -> bool:
        if topic in self._exact.get(action, ()):
            return True
        return any(topic.startswith(p) for p in self._prefixes.get(action, ()))

    def allows(self, action: Action, topic: str) -> bool:
        """Whether a grant of ``action`` (or ``admin``) matches ``topic``."""
        return self._matches(Action.ADMIN.value, topic) or self._matches(
            action.value, topic
        )

    def any_matches(self, topic: str) -> bool:
        """Whether any topic grant matches ``topic`` (enough to read it): a
        ``metrics`` grant reads no topic."""
        return any(
            self._matches(action, topic)
            for action in self._exact
            if action in TOPIC_ACTIONS
        )

    def reads_metrics(self) -> bool:
        """Whether these grants let their user read ``/metrics``: a metrics
        grant, or admin on ``*``."""
        return self.full_admin or "" in self._prefixes.get(Action.METRICS.value, ())

    def covers(self, action: str, pattern: str) -> bool:
        """Whether a grant of ``action`` on ``pattern`` is within these grants:
        an equal or wider pattern, of the same action or of ``admin``."""
        for grant in self.grants:
            if grant.action in (action, Action.ADMIN.value) and any(
                pattern_covers(held, pattern) for held in grant.patterns
            ):
                return True
        return False

    def uncovered(self, grants: Iterable[Grant]) -> list[tuple[str, str]]:
        """The (action, pattern) pairs of ``grants`` these do not cover."""
        return [
            (grant.action, pattern)
            for grant in grants
            for pattern in grant.patterns
            if not self.covers(grant.action, pattern)
        ]

    def listing_prefixes(self) -> list[tuple[str, bool]] | None:
        """The name ranges a topic listing shows: ``(prefix, exact)`` pairs,
        sorted and disjoint (``exact``: the prefix is a whole name); ``None``
        for every name."""
        prefixes = {
            p for a, ps in self._prefixes.items() if a in TOPIC_ACTIONS for p in ps
        }
        if "" in prefixes:
            return None
        exact = {n for a, ns in self._exact.items() if a in TOPIC_ACTIONS for n in ns}
        kept: dict[str, bool] = {}
        # Shortest first: a prefix under a kept one adds nothing.
        for prefix in sorted(prefixes, key=len):
            if not any(prefix.startswith(k) for k in kept):
                kept[prefix] = False
        ranges = tuple(kept)
        for name in exact:
            if not name.startswith(ranges):
                kept[name] = True
        return sorted(kept.items())


def is_full_admin(grants: Iterable[Grant]) -> bool:
    """Whether ``grants`` include ``admin`` on ``*``."""
    return any(g.action == Action.ADMIN.value and "*" in g.patterns for g in grants)
