"""What an authenticated user may do: one call per action, from the resources.

A resource states what a request does, and to which topic, before it does
anything::

    authorize(req, Action.PRODUCE, name)

The request's :class:`~narad.security.authn.Principal` and the node's
:class:`Gate` are on ``req.context``, put there by the authentication
middleware (:mod:`narad.http.middleware`) on every route but the health
probes; while security is off the principal is
:data:`~narad.security.authn.OPEN`, which every check passes.

The rules (see :class:`~narad.security.grants.Action`):

- produce, consume, create: a grant of that action (or ``admin``) matching
  the topic's name;
- read (a topic's record, its schemas, a dry-run compatibility check
  against them): any grant matching it, or owning it;
- alter, delete, manage fan-out children: owning the topic, or ``admin``
  matching it;
- the Users API: an ``admin`` grant (what it may then hand out is the user
  service's to check);
- ``/metrics`` (unless ``metrics.public``): a ``metrics`` grant or ``admin``
  on ``*``, since it names every topic (:meth:`Gate.check` with
  :attr:`Action.METRICS`).

A user with no grant matching a topic is answered 403 whether or not the
topic exists, so names cannot be probed.

Owning is a property of one incarnation of a name: :func:`authorize` returns
the epoch of the record that made its user the owner, and the service acts
on that epoch only (a topic deleted and created again meanwhile, by someone
else, is not the one its user owns).
"""

from __future__ import annotations

import falcon

from narad.broker.records import TopicRecords
from narad.errors import Forbidden
from narad.errors import NotAllowed
from narad.errors import TopicNotFound
from narad.security.authn import Principal
from narad.security.grants import OWNER_ACTIONS
from narad.security.grants import Action
from narad.storage import TopicMeta


class MetricsNotAllowed(Forbidden):
    """The user may not read ``/metrics`` (403)."""

    def __init__(self, user: str) -> None:
        self.user = user
        super().__init__(
            f"user {user} may not read the metrics: that takes a metrics grant "
            "or admin on '*'"
        )


class Gate:
    """The checks that need more than the principal: topic owners."""

    def __init__(self, records: TopicRecords) -> None:
        self._records = records

    def check(
        self, principal: Principal, action: Action, topic: str | None
    ) -> str | None:
        """Return if ``principal`` may do ``action`` to ``topic``; else raise.

        Returns:
            The epoch of the topic's record when owning it is what allows
            ``action``; None when a grant does, whatever the topic is now.

        Raises:
            NotAllowed: 403, naming the user, the action and the topic.
            MetricsNotAllowed: 403 to :attr:`Action.METRICS`.
            TopicNotFound: an owner action on a topic that does not exist,
                asked by a user with a grant matching its name.
        """
        perms = principal.permissions
        if action is Action.METRICS:
            if not perms.reads_metrics():
                raise MetricsNotAllowed(principal.name)
            return None
        if action is Action.ADMIN:
            if not perms.admin:
                raise NotAllowed(
                    principal.name, "manage", None, "that takes an admin grant"
                )
            return None
        assert topic is not None, f"{action} names a topic"
        if action is Action.READ:
            if perms.any_matches(topic):
                return None
            epoch = self._owns(principal, topic)
            if epoch is not None:
                return epoch
            raise NotAllowed(principal.name, action.words, topic, "no grant matches it")
        if action in OWNER_ACTIONS:
            if perms.allows(Action.ADMIN, topic):
                return None
            epoch = self._owns(principal, topic)
            if epoch is not None:
                return epoch
            raise NotAllowed(
                principal.name,
                action.words,
                topic,
                "only its owner or an admin may",
            )
        if not perms.allows(action, topic):
            raise NotAllowed(
                principal.name,
                action.words,
                topic,
                f"no {action.value} grant matches it",
            )
        return None

    def confirm_read(self, principal: Principal, topic: str, epoch: str | None) -> None:
        """After a read allowed by owning ``topic`` at ``epoch`` (what
        :meth:`check` returned), refuse it unless the topic is still that
        incarnation: then all that was read was its own (an incarnation,
        once gone, never comes back).

        Raises:
            NotAllowed: another topic took the name (403, as for any topic
                no grant of the user matches).
        """
        if epoch is None:
            return
        try:
            self._records.refresh(topic, epoch=epoch)
        except TopicNotFound:
            raise NotAllowed(
                principal.name, Action.READ.words, topic, "no grant matches it"
            ) from None

    def _owns(self, principal: Principal, topic: str) -> str | None:
        """The epoch of ``topic`` as ``principal`` owns it; None if not."""
        try:
            meta: TopicMeta = self._records.refresh(topic)
        except TopicNotFound:
            if principal.permissions.any_matches(topic):
                raise
            return None
        if principal.name and meta.owner == principal.name:
            return meta.epoch
        return None


def authorize(
    req: falcon.Request, action: Action, topic: str | None = None
) -> str | None:
    """Refuse the request (403) unless its user may do ``action`` to ``topic``.

    ``topic`` is omitted for :attr:`Action.ADMIN` (the Users API); given,
    it is also the topic the access log names (a create's comes from its
    body, not its path).

    Returns:
        The epoch the user owns when owning the topic is what allows
        ``action`` (the service must act on that incarnation only, and a
        read be confirmed with :func:`confirm_read`), else None.
    """
    if topic is not None:
        req.context.topic = topic
    return req.context.gate.check(req.context.principal, action, topic)


def confirm_read(req: falcon.Request, topic: str, owned: str | None) -> None:
    """Refuse (403) a read that :func:`authorize` allowed by owning ``topic``
    (``owned``: the epoch it returned) if another topic took the name since:
    call it once everything answered is read."""
    req.context.gate.confirm_read(req.context.principal, topic, owned)


def reauthorize(req: falcon.Request, action: Action, topic: str) -> None:
    """:func:`authorize` again, credentials included, for a request still at
    work: a long poll calls it before each look after its first, so that once
    this worker knows its user deleted (401) or the grant revoked (403), the
    poll ends without leasing. A lookup while the worker's users stream is
    live (see :meth:`~narad.security.authn.Authenticator.reconfirm`).
    """
    authenticator = req.context.authenticator
    if authenticator is not None:
        req.context.principal = authenticator.reconfirm(
            req.get_header("Authorization"), req.remote_addr or ""
        )
    req.context.gate.check(req.context.principal, action, topic)


def principal(req: falcon.Request) -> Principal:
    """Who the request is (:data:`~narad.security.authn.OPEN` when security
    is off)."""
    return req.context.principal
