"""The credential checks in one process, over the toy in-memory backend."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from narad.broker.notifications import Listener
from narad.errors import AuthenticationRequired
from narad.errors import BadCredentials
from narad.errors import CredentialChecksBusy
from narad.errors import MalformedCredentials
from narad.errors import TooManyFailures
from narad.security import authn
from narad.security.authn import Authenticator
from narad.security.authn import Hasher
from narad.security.authn import parse_basic
from narad.security.grants import Action
from narad.security.limiter import FailureLimiter
from narad.security.passwords import Scrypt
from narad.security.passwords import hash_password
from narad.storage import Event
from narad.storage import Grant
from narad.storage import UserRecord
from tests.contract.memory import MemoryStorage

CHEAP = Scrypt(log2_n=10)
ALICE = ("alice", "alice-password")


def header(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class CountingHasher(Hasher):
    def __init__(self) -> None:
        super().__init__(CHEAP)
        self.verified = 0

    def verify(self, password, stored):
        self.verified += 1
        return super().verify(password, stored)


def eventually(check, timeout=10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def add_user(storage, name="alice", password="alice-password") -> UserRecord:
    user = UserRecord(
        name=name,
        password_hash=hash_password(password, CHEAP),
        grants=(Grant("produce", ("a.*",)),),
        admin=False,
        created_ms=0,
    )
    storage.create_user(user)
    return storage.get_user(name)


class Setup:
    def __init__(
        self,
        storage: MemoryStorage,
        *,
        burst: int = 100,
        address_burst: int = 100,
        user_burst: int | None = None,
        user_per_minute: int = 1,
        clock=time.monotonic,
    ) -> None:
        self.storage = storage
        self.listener = Listener(storage, events={Event.USER_CHANGED})
        self.live: list[bool] = []
        self.listener.on_live(self.live.append)
        self.hasher = CountingHasher()
        self.slept: list[float] = []  # the delays applied, not waited
        self.auth = Authenticator(
            storage,
            self.listener,
            self.hasher,
            FailureLimiter(burst=burst, per_minute=1, clock=clock),
            FailureLimiter(burst=address_burst, per_minute=1, clock=clock),
            users=None
            if user_burst is None
            else FailureLimiter(
                burst=user_burst, per_minute=user_per_minute, clock=clock
            ),
            cache_s=60,
            clock=clock,
            sleep=self.slept.append,
        )

    def login(self, user=ALICE, address="10.0.0.1"):
        return self.auth.authenticate(header(*user), address)

    def reconfirm(self, user=ALICE, address="10.0.0.1"):
        return self.auth.reconfirm(header(*user), address)

    def count_reads(self, monkeypatch) -> list[str]:
        reads: list[str] = []
        get_user = self.storage.get_user

        def counted(name):
            reads.append(name)
            return get_user(name)

        monkeypatch.setattr(self.storage, "get_user", counted)
        return reads


@pytest.fixture
def setup():
    made = Setup(MemoryStorage())
    add_user(made.storage)
    yield made
    made.listener.stop()


def test_credentials_are_hashed_once_then_remembered(setup):
    principal = setup.login()
    assert principal.name == "alice"
    assert principal.permissions.allows(Action.PRODUCE, "a.x")
    eventually(lambda: setup.live == [True])
    setup.login()  # checked against the record once more: it predates the stream
    for _ in range(5):
        assert setup.login().name == "alice"
    assert setup.hasher.verified == 1


def test_a_change_anywhere_drops_the_remembered_credentials(setup):
    setup.login()
    eventually(lambda: setup.live == [True])
    setup.login()
    user = setup.storage.get_user("alice")
    new_hash = hash_password("changed-password", CHEAP)
    setup.storage.set_password("alice", new_hash, revision=user.revision)

    def refused() -> bool:
        try:
            setup.login()
        except BadCredentials:
            return True
        return False

    eventually(refused)
    assert setup.login(("alice", "changed-password")).name == "alice"


def test_without_a_live_stream_each_request_reads_the_record():
    storage = MemoryStorage(notifications=False)
    add_user(storage)
    made = Setup(storage)
    made.login()
    made.login()
    assert made.hasher.verified == 1  # the stored hash was unchanged: no hash
    user = storage.get_user("alice")
    storage.delete_user("alice", revision=user.revision)
    with pytest.raises(BadCredentials):
        made.login()


def test_a_long_poll_reconfirms_its_user_without_a_read(setup, monkeypatch):
    setup.login()
    eventually(lambda: setup.live == [True])
    setup.login()
    reads = setup.count_reads(monkeypatch)
    for _ in range(100):
        assert setup.reconfirm().name == "alice"
    assert reads == []
    user = setup.storage.get_user("alice")
    setup.storage.delete_user("alice", revision=user.revision)

    def refused() -> bool:
        try:
            setup.reconfirm()
        except BadCredentials:
            return True
        return False

    eventually(refused)


def test_without_a_live_stream_a_long_poll_reads_its_user_once_a_second(
    monkeypatch,
):
    now = [0.0]
    storage = MemoryStorage(notifications=False)
    add_user(storage)
    made = Setup(storage, clock=lambda: now[0])
    made.login()
    reads = made.count_reads(monkeypatch)
    for _ in range(100):
        assert made.reconfirm().name == "alice"
    assert reads == []
    now[0] += authn.RECONFIRM_S
    assert made.reconfirm().name == "alice"
    assert made.reconfirm().name == "alice"
    assert reads == ["alice"]  # and the entry it refreshed serves the next
    user = storage.get_user("alice")
    storage.delete_user("alice", revision=user.revision)
    now[0] += authn.RECONFIRM_S
    with pytest.raises(BadCredentials):
        made.reconfirm()


def test_credentials_past_the_cache_time_are_read_again_not_hashed(monkeypatch):
    now = [0.0]
    made = Setup(MemoryStorage(), clock=lambda: now[0])
    add_user(made.storage)
    made.login()
    eventually(lambda: made.live == [True])
    reads = made.count_reads(monkeypatch)
    now[0] += 61  # past cache_s: the stream no longer vouches alone
    assert made.login().name == "alice"
    assert made.login().name == "alice"
    assert reads == ["alice"]  # one read, and the entry it refreshed serves
    assert made.hasher.verified == 1
    # A password changed while the stream was silent: hashed again, refused.
    user = made.storage.get_user("alice")
    made.storage.set_password(
        "alice", hash_password("changed-password", CHEAP), revision=user.revision
    )
    made.auth._trusted = False  # the stream is down: the change goes unannounced
    now[0] += 61
    with pytest.raises(BadCredentials):
        made.login()
    assert made.hasher.verified == 2
    made.listener.stop()


def test_the_right_password_from_an_address_that_is_not_failing_always_passes():
    """Issue 50: wrong passwords for a name from one address never lock its
    owner out elsewhere, remembered credentials or not, past the cache time
    too, with every limit at its tightest."""
    now = [0.0]
    made = Setup(MemoryStorage(), burst=1, user_burst=1, clock=lambda: now[0])
    add_user(made.storage)
    made.login(address="10.0.0.2")  # remembered from here
    for _ in range(20):
        with pytest.raises((BadCredentials, TooManyFailures)):
            made.login(("alice", "guess-guess"), "10.0.0.3")
    assert made.login(address="10.0.0.2").name == "alice"
    now[0] += 61  # past the cache time: checked again
    for _ in range(20):
        with pytest.raises((BadCredentials, TooManyFailures)):
            made.login(("alice", "guess-guess"), "10.0.0.3")
    assert made.login(address="10.0.0.2").name == "alice"
    # From addresses this worker has never seen: a hash each, not remembered
    # (a new worker's case), and answered at once.
    for n in range(10, 20):
        made.auth.cache.clear()
        assert made.login(address=f"10.0.1.{n}").name == "alice"
    assert made.slept == []
    made.listener.stop()


def test_wrong_and_unknown_users_cost_a_hash_alike(setup):
    with pytest.raises(BadCredentials):
        setup.login(("alice", "wrong-password"))
    with pytest.raises(BadCredentials):
        setup.login(("mallory", "some-password"))
    assert setup.hasher.verified == 2


@pytest.mark.parametrize(
    "value",
    [
        "Bearer x",
        "Basic",
        "Basic !!",
        "Basic " + base64.b64encode(b"nocolon").decode(),
        "Basic \xe9\xe9\xe9\xe9",  # a header's Latin-1 bytes: not base64
    ],
)
def test_malformed_headers(value):
    with pytest.raises(MalformedCredentials):
        parse_basic(value)


def test_no_header_is_authentication_required(setup):
    with pytest.raises(AuthenticationRequired) as err:
        setup.auth.authenticate(None, "10.0.0.1")
    assert err.value.headers == {"WWW-Authenticate": 'Basic realm="narad"'}


def test_failures_past_the_burst_are_refused_without_a_hash():
    made = Setup(MemoryStorage(), burst=3)
    add_user(made.storage)
    made.login(address="10.0.0.9")  # alice's own, from elsewhere, remembered
    for _ in range(3):
        with pytest.raises(BadCredentials):
            made.login(("alice", "guess-guess"), "10.0.0.2")
    checked = made.hasher.verified
    with pytest.raises(TooManyFailures) as err:
        made.login(("alice", "guess-guess"), "10.0.0.2")
    assert int(err.value.headers["Retry-After"]) >= 1
    # The right password from the guessing address: refused, unchecked.
    with pytest.raises(TooManyFailures):
        made.login(address="10.0.0.2")
    assert made.hasher.verified == checked
    # The name is limited from there only: a guess from another address is
    # checked, and alice's credentials pass from hers, remembered or not.
    with pytest.raises(BadCredentials):
        made.auth.authenticate(header("alice", "another-guess"), "10.0.0.3")
    assert made.hasher.verified == checked + 1
    assert made.login(address="10.0.0.9").name == "alice"
    assert made.login(address="10.0.0.4").name == "alice"
    made.listener.stop()


def test_a_name_failing_from_everywhere_delays_only_failing_addresses():
    now = [0.0]
    made = Setup(
        MemoryStorage(), user_burst=2, user_per_minute=60, clock=lambda: now[0]
    )
    add_user(made.storage)
    # Two addresses use up the name's allowance (one a second comes back).
    for address in ("10.0.0.2", "10.0.0.3"):
        with pytest.raises(BadCredentials):
            made.login(("alice", "guess-guess"), address)
    assert made.slept == []
    # A failing address's next guess waits its turn, and the next after it
    # waits one turn longer; past MAX_DELAY_S of turns it is refused.
    with pytest.raises(BadCredentials):
        made.login(("alice", "guess-guess"), "10.0.0.2")
    with pytest.raises(BadCredentials):
        made.login(("alice", "guess-guess"), "10.0.0.3")
    assert made.slept == [pytest.approx(1.0), pytest.approx(2.0)]
    for _ in range(3):
        with pytest.raises(BadCredentials):
            made.login(("alice", "guess-guess"), "10.0.0.2")
    assert made.slept[-1] == pytest.approx(authn.MAX_DELAY_S)
    checked = made.hasher.verified
    with pytest.raises(TooManyFailures) as err:
        made.login(("alice", "guess-guess"), "10.0.0.3")
    assert int(err.value.headers["Retry-After"]) >= authn.MAX_DELAY_S
    assert made.hasher.verified == checked
    # The right password from an address that has not been failing: at once.
    delays = len(made.slept)
    assert made.login(address="10.0.0.9").name == "alice"
    assert len(made.slept) == delays
    # From a failing address it is delayed (not refused) once turns free up;
    # its turn is given back, being no failure.
    now[0] += 3
    assert made.login(address="10.0.0.2").name == "alice"
    assert made.slept[delays:] == [pytest.approx(3.0)]
    assert made.auth._users.wait("alice") == pytest.approx(3.0)
    # Other names are not affected.
    add_user(made.storage, "bob", "bob-password")
    with pytest.raises(BadCredentials):
        made.login(("bob", "guess-guess"), "10.0.0.2")
    assert len(made.slept) == delays + 1
    made.listener.stop()


def test_an_address_spraying_user_names_is_limited():
    made = Setup(MemoryStorage(), address_burst=3)
    add_user(made.storage)
    add_user(made.storage, "bob", "bob-password")
    made.login(("bob", "bob-password"), "10.0.0.2")  # bob's, remembered
    for n in range(3):
        with pytest.raises(BadCredentials):
            made.login((f"user{n}", "spray-password"), "10.0.0.2")
    with pytest.raises(TooManyFailures):
        made.login(("user9", "spray-password"), "10.0.0.2")
    # New credentials from there wait; verified ones of a user not under
    # attack go on; other addresses are not affected.
    with pytest.raises(TooManyFailures):
        made.login(address="10.0.0.2")
    assert made.login(("bob", "bob-password"), "10.0.0.2").name == "bob"
    assert made.login(address="10.0.0.5").name == "alice"
    made.listener.stop()


def test_the_same_credentials_at_once_share_one_hash(setup, monkeypatch):
    gate = threading.Event()
    verify = setup.hasher.verify

    def slow(password, stored):
        gate.wait(5)
        return verify(password, stored)

    monkeypatch.setattr(setup.hasher, "verify", slow)
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(setup.login().name))
        for _ in range(8)
    ]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    gate.set()
    for thread in threads:
        thread.join(10)
    assert results == ["alice"] * 8
    assert setup.hasher.verified == 1


def test_too_many_checks_waiting_is_503(monkeypatch):
    monkeypatch.setattr(authn, "CHECK_QUEUE", 0)
    hasher = Hasher(CHEAP)
    with pytest.raises(CredentialChecksBusy) as err:
        hasher.verify("password", None)
    assert err.value.headers == {"Retry-After": "1"}


def test_a_check_raced_by_a_change_is_remembered_if_it_still_holds(setup, monkeypatch):
    verify = setup.hasher.verify
    raced = []

    def racing(password, stored):
        if not raced:  # the user changes on another node mid-check
            raced.append(1)
            setup.auth._changed("alice")
        return verify(password, stored)

    monkeypatch.setattr(setup.hasher, "verify", racing)
    setup.login()
    eventually(lambda: setup.live == [True])
    setup.login()
    # Remembered after a second read showed the same password.
    assert setup.hasher.verified == 1
    # Had the password changed meanwhile, nothing would have been remembered.
    raced.clear()
    new_hash = hash_password("changed-password", CHEAP)

    def changing(password, stored):
        if not raced:
            raced.append(1)
            user = setup.storage.get_user("bob")
            setup.storage.set_password("bob", new_hash, revision=user.revision)
            setup.auth._changed("bob")
        return verify(password, stored)

    add_user(setup.storage, "bob", "bob-password")
    monkeypatch.setattr(setup.hasher, "verify", changing)
    assert setup.login(("bob", "bob-password")).name == "bob"  # began before
    with pytest.raises(BadCredentials):
        setup.login(("bob", "bob-password"))


def test_remembered_credentials_are_what_this_worker_verified(setup):
    assert setup.auth.remembered(header(*ALICE)) is None
    assert setup.auth.remembered(None) is None
    assert setup.auth.remembered("Basic !!") is None
    setup.login()
    assert setup.auth.remembered(header(*ALICE)).name == "alice"
    assert setup.auth.remembered(header("alice", "another-password")) is None
    setup.auth._changed("alice")  # a change of alice announced
    assert setup.auth.remembered(header(*ALICE)) is None
