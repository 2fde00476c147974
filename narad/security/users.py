"""Users: create, read, replace grants, change passwords, delete.

Nobody hands out more than they hold: every grant given must be covered by
one of the caller's (same action or ``admin``, an equal or wider pattern),
and an admin may only create, change, reset or delete a user whose grants
their own cover, so a scoped admin (``admin`` on ``invoices.*``) can neither
take over nor demote a wider one. Ownership goes by user name, so the admin's
``admin`` patterns must also match every topic the name owns: otherwise an
admin could reset the password of (or create anew) a user owning a topic
outside its scope and act on the topic as that user. The storage scripts keep
the last full admin (``admin`` on ``*``) from being deleted or demoted.

Each write passes the revision of the record it was checked against; when
the user changed in between, the write is refused by the script and the
check runs again on the new record (a few times, then 503).
"""

from __future__ import annotations

from collections.abc import Sequence

from narad.broker import now_ms
from narad.errors import GrantNotHeld
from narad.errors import InvalidArgument
from narad.errors import LastAdmin
from narad.errors import OwnsTopicOutside
from narad.errors import UserExists
from narad.errors import UserKeptChanging
from narad.errors import UserNotFound
from narad.errors import WrongCurrentPassword
from narad.security.authn import Hasher
from narad.security.authn import Principal
from narad.security.grants import Action
from narad.security.grants import is_full_admin
from narad.storage import Grant
from narad.storage import Status
from narad.storage import Storage
from narad.storage import UserRecord

ATTEMPTS = 4
#: Topic names read per round trip when looking for what a user name owns.
OWNED_PAGE = 1000


class UserService:
    def __init__(self, storage: Storage, hasher: Hasher) -> None:
        self.storage = storage
        self.hasher = hasher

    def get(self, name: str) -> UserRecord:
        user = self.storage.get_user(name)
        if user is None:
            raise UserNotFound(name)
        return user

    def list(self, *, after: str, limit: int) -> tuple[list[UserRecord], str | None]:
        page = self.storage.list_users(after=after, limit=limit)
        users = self.storage.get_users(page.names)
        return [u for u in users if u is not None], page.next_token

    def create(
        self, caller: Principal, name: str, password: str, grants: Sequence[Grant]
    ) -> UserRecord:
        _hand_out(caller, grants, "grant")
        self._owned_within(caller, name, f"create user {name}")
        user = UserRecord(
            name=name,
            password_hash=self.hasher.hash(password),
            grants=tuple(grants),
            admin=is_full_admin(grants),
            created_ms=now_ms(),
            revision=1,
        )
        if self.storage.create_user(user) is Status.EXISTS:
            raise UserExists(name)
        return user

    def replace_grants(
        self, caller: Principal, name: str, grants: Sequence[Grant]
    ) -> UserRecord:
        _hand_out(caller, grants, "grant")
        for _ in range(ATTEMPTS):
            user = self.get(name)
            self._manage(caller, user)
            status = self.storage.replace_grants(
                name, grants, admin=is_full_admin(grants), revision=user.revision
            )
            if status is Status.OK:
                return self.get(name)
            _refused(status, name)
        raise UserKeptChanging(name)

    def set_password(
        self, caller: Principal, name: str, password: str, current: str | None
    ) -> None:
        """A user's own change needs ``current``; an admin's reset of another
        user does not (and takes what any change of that user takes)."""
        own = caller.name == name
        if own and current is None:
            raise InvalidArgument(
                "current_password is required to change your own password"
            )
        new_hash = None
        for _ in range(ATTEMPTS):
            user = self.get(name)
            if own:
                if not self.hasher.verify(current, user.password_hash):
                    raise WrongCurrentPassword()
            else:
                self._manage(caller, user)
            new_hash = new_hash or self.hasher.hash(password)
            status = self.storage.set_password(name, new_hash, revision=user.revision)
            if status is Status.OK:
                return
            _refused(status, name)
        raise UserKeptChanging(name)

    def delete(self, caller: Principal, name: str) -> None:
        for _ in range(ATTEMPTS):
            user = self.get(name)
            self._manage(caller, user)
            status = self.storage.delete_user(name, revision=user.revision)
            if status is Status.OK:
                return
            _refused(status, name)
        raise UserKeptChanging(name)

    def _manage(self, caller: Principal, user: UserRecord) -> None:
        """An admin may change only a user whose grants theirs cover and whose
        topics their ``admin`` patterns match (their own user aside: nobody
        takes over what they own already).

        Checked on every attempt: a user whose revision moved may have been
        given, and used, a grant to create a topic outside the caller's.
        """
        missing = caller.permissions.uncovered(user.grants)
        if missing:
            raise GrantNotHeld(caller.name, f"change user {user.name}", missing)
        if caller.name != user.name:
            self._owned_within(caller, user.name, f"change user {user.name}")

    def _owned_within(self, caller: Principal, name: str, what: str) -> None:
        """Refuse when ``name`` owns a topic no ``admin`` grant of the caller
        matches.

        Reads every topic name a page at a time, and the owners of those
        outside the caller's patterns: a full admin reads nothing, and these
        are rare requests. A topic that exists throughout is seen; one the
        name could create meanwhile is within its grants, which the caller's
        cover (or the user's revision moves and the check runs again).
        """
        if caller.permissions.full_admin:
            return
        after = ""
        while True:
            page = self.storage.list_topics(after=after, limit=OWNED_PAGE)
            outside = [
                topic
                for topic in page.names
                if not caller.permissions.allows(Action.ADMIN, topic)
            ]
            owners = self.storage.topic_owners(outside) if outside else []
            for topic, owner in zip(outside, owners, strict=True):
                if owner == name:
                    raise OwnsTopicOutside(caller.name, what, name, topic)
            if page.next_token is None:
                return
            after = page.next_token


def _hand_out(caller: Principal, grants: Sequence[Grant], what: str) -> None:
    missing = caller.permissions.uncovered(grants)
    if missing:
        raise GrantNotHeld(caller.name, what, missing)


def _refused(status: Status, name: str) -> None:
    """Raise for a refusal; return for STALE_USER (check again)."""
    if status is Status.NO_USER:
        raise UserNotFound(name)
    if status is Status.LAST_ADMIN:
        raise LastAdmin(name)
