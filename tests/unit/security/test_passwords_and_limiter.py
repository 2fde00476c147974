from __future__ import annotations

import threading

import pytest

from narad.security.limiter import FailureLimiter
from narad.security.limiter import address_key
from narad.security.passwords import Scrypt
from narad.security.passwords import hash_password
from narad.security.passwords import return_hash_memory
from narad.security.passwords import verify_password

CHEAP = Scrypt(log2_n=10)


def test_a_hash_says_how_it_was_made_and_is_salted():
    first = hash_password("correct horse", CHEAP)
    second = hash_password("correct horse", CHEAP)
    assert first.startswith("scrypt$10$8$5$")
    assert first != second  # a salt of its own each time
    assert verify_password("correct horse", first, CHEAP)
    assert verify_password("correct horse", second, CHEAP)
    assert not verify_password("correct horsE", first, CHEAP)


def _rss_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def test_hashes_on_many_threads_give_their_memory_back():
    # Each default hash fills 16 MiB; without return_hash_memory every
    # thread that ever hashed would keep its block (a worker's offload pool
    # has many).
    assert return_hash_memory()
    hash_password("a password")  # after one, glibc would keep the next ones
    before = _rss_mib()
    # At once, as the pool runs them: each thread hashes in its own arena.
    threads = [
        threading.Thread(target=hash_password, args=("a password",)) for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _rss_mib() - before < 16


def test_a_hash_of_another_cost_still_verifies():
    stored = hash_password("pw-of-old", Scrypt(log2_n=11, p=1))
    assert verify_password("pw-of-old", stored, CHEAP)


@pytest.mark.parametrize(
    "stored",
    [
        None,  # no such user
        "",
        "bcrypt$x",
        "scrypt$10$8$5$salt",
        "scrypt$x$8$5$c2FsdA$ZGlnZXN0",
        "scrypt$30$8$5$c2FsdA$ZGlnZXN0",  # would take 1 TiB
        "scrypt$10$8$5$!!$ZGlnZXN0",
    ],
)
def test_no_user_or_a_malformed_hash_never_matches(stored):
    assert verify_password("anything-at-all", stored, CHEAP) is False


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_then_waiting_for_the_refill():
    clock = Clock()
    limiter = FailureLimiter(burst=3, per_minute=6, clock=clock)  # one per 10 s
    for _ in range(3):
        assert limiter.wait("k") == 0
        limiter.fail("k")
    assert limiter.wait("k") == pytest.approx(10.0)
    assert limiter.wait("other") == 0
    clock.now = 4.0
    assert limiter.wait("k") == pytest.approx(6.0)
    clock.now = 10.0
    assert limiter.wait("k") == 0
    assert not limiter.clean("k")
    clock.now = 30.0
    assert limiter.clean("k")


def test_a_nodes_figures_are_shared_by_its_workers():
    clock = Clock()
    limiter = FailureLimiter(burst=8, per_minute=60, share=4, clock=clock)
    limiter.fail("k")
    limiter.fail("k")
    assert limiter.wait("k") == pytest.approx(4.0)  # 15 a minute per worker
    tiny = FailureLimiter(burst=1, per_minute=1, share=4, clock=clock)
    assert tiny.wait("k") == 0  # at least one attempt per worker


def test_the_least_recent_keys_go_first_past_the_cap():
    limiter = FailureLimiter(burst=1, per_minute=1, clock=Clock(), max_keys=2)
    for key in ("a", "b", "c"):
        limiter.fail(key)
    assert limiter.wait("a") == 0  # forgotten
    assert limiter.wait("b") > 0 and limiter.wait("c") > 0


def test_ipv6_addresses_count_per_64():
    assert address_key("2001:db8::1") == address_key("2001:db8::ffff:1")
    assert address_key("2001:db8::1") != address_key("2001:db8:0:1::1")
    assert address_key("10.0.0.1") == "10.0.0.1"
    assert address_key("") == ""
    # IPv4 clients of a dual-stack socket: each its own address.
    assert address_key("::ffff:10.0.0.1") == "10.0.0.1"
    assert address_key("::ffff:10.0.0.1") != address_key("::ffff:10.0.0.2")


def test_turns_are_reserved_one_after_another_up_to_the_longest_wait():
    clock = Clock()
    limiter = FailureLimiter(burst=1, per_minute=60, clock=clock)  # one a second
    assert limiter.reserve("k", 3) == 0  # a full bucket: now, nothing taken
    limiter.fail("k")
    assert [limiter.reserve("k", 3) for _ in range(4)] == [
        pytest.approx(1.0),
        pytest.approx(2.0),
        pytest.approx(3.0),
        None,  # four seconds away: refused, nothing taken
    ]
    assert limiter.wait("k") == pytest.approx(4.0)
    # A failure meanwhile takes no turn of those handed out...
    limiter.fail("k")
    assert limiter.wait("k") == pytest.approx(4.0)
    # ... and a turn given back frees one.
    limiter.release("k")
    assert limiter.wait("k") == pytest.approx(3.0)
    clock.now = 3.0
    assert limiter.wait("k") == 0
    limiter.release("other")  # never taken: nothing happens
    assert limiter.clean("other")
