"""Long-poll wake-ups and the empty-topic notes (in-process, fakeredis)."""

from __future__ import annotations

import threading
import time

import gevent
import pytest

from narad import testing
from narad.broker import waiters as waiters_module
from narad.broker.waiters import EMPTY_NOTE_MS
from narad.broker.waiters import MARK_SLACK_MS
from narad.broker.waiters import GreenCondition
from narad.broker.waiters import Waiters
from narad.broker.waiters import poll_deadline
from narad.storage import Event


@pytest.fixture
def app(config):
    return testing.make_app(config)


@pytest.fixture
def waiters(app):
    waiters = app._waiters
    waiters.generation("t")  # starts the listener
    deadline = time.monotonic() + 5
    while not waiters.quiet("t", waiters.generation("t")):
        assert time.monotonic() < deadline, "no subscription"
        time.sleep(0.01)
    yield waiters
    waiters.stop()


def test_an_empty_look_is_remembered_until_the_topic_is_woken(waiters):
    seen = waiters.generation("t")
    waiters.remember_empty(("t", "e", None), "t", seen, None, 1000)
    assert waiters.known_empty(("t", "e", None), "t", 1500) == (seen, None)
    assert waiters.known_empty(("t", "e", 0), "t", 1500) is None  # other key
    storage = waiters._listener._storage
    storage.client.redis.publish(storage.EVENTS, f"{Event.MESSAGES.value} t")
    deadline = time.monotonic() + 5
    while waiters.generation("t") == seen:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert waiters.known_empty(("t", "e", None), "t", 1500) is None


def test_an_old_note_sends_one_consumer_to_look_and_serves_the_others(waiters):
    seen = waiters.generation("t")
    waiters.remember_empty("k", "t", seen, None, 1000)
    later = 1000 + EMPTY_NOTE_MS
    assert waiters.known_empty("k", "t", later) is None  # this one looks
    assert waiters.known_empty("k", "t", later + 1) == (seen, None)
    waiters.forget_empty("k", "t")  # its look found a message, or no topic
    assert waiters.known_empty("k", "t", later + 2) is None


def test_a_note_lapses_with_the_next_lease_expiry(waiters):
    seen = waiters.generation("t")
    waiters.remember_empty("k", "t", seen, 1200, 1000)
    assert waiters.known_empty("k", "t", 1100) == (seen, 1200)
    assert waiters.known_empty("k", "t", 1200) is None


def test_a_look_raced_by_a_wake_up_is_not_remembered(waiters):
    seen = waiters.generation("t") - 1  # the topic moved on during the look
    waiters.remember_empty("k", "t", seen, None, 1000)
    assert waiters.known_empty("k", "t", 1000) is None


def test_repeated_long_polls_on_an_empty_topic_look_once(app, waiters):
    import falcon.testing

    client = falcon.testing.TestClient(app)
    before = waiters.generation("t")
    assert client.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
    # The create's own notification must land before the looks are counted.
    deadline = time.monotonic() + 5
    while waiters.generation("t") == before:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    storage = app._waiters._listener._storage
    looks = []
    reserve = storage.reserve

    def counting(*args, **kwargs):
        looks.append(1)
        return reserve(*args, **kwargs)

    storage.reserve = counting
    for _ in range(5):
        assert (
            client.simulate_get(
                "/v1/topics/t/consume", params={"wait": "20ms"}
            ).status_code
            == 204
        )
    assert len(looks) == 1
    # A produce wakes the topic: the next poll looks again and finds it.
    assert client.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202
    deadline = time.monotonic() + 5
    while True:
        resp = client.simulate_get("/v1/topics/t/consume", params={"wait": "1s"})
        if resp.status_code == 200 or time.monotonic() > deadline:
            break
    assert resp.status_code == 200


def test_batch_and_single_long_polls_on_an_empty_topic_share_one_look(app, waiters):
    import falcon.testing

    client = falcon.testing.TestClient(app)
    before = waiters.generation("t")
    assert client.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
    deadline = time.monotonic() + 5
    while waiters.generation("t") == before:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    storage = app._waiters._listener._storage
    looks = []
    for name in ("reserve", "reserve_batch"):
        original = getattr(storage, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            looks.append(_name)
            return _original(*args, **kwargs)

        setattr(storage, name, counting)
    for path in ["/v1/topics/t/consume/batch", "/v1/topics/t/consume"] * 3:
        resp = client.simulate_get(path, params={"wait": "20ms"})
        assert resp.status_code == 204
    assert looks == ["reserve_batch"]
    assert client.simulate_post("/v1/topics/t/produce", body=b"{}").status_code == 202
    deadline = time.monotonic() + 5
    while True:
        resp = client.simulate_get("/v1/topics/t/consume/batch", params={"wait": "1s"})
        if resp.status_code == 200 or time.monotonic() > deadline:
            break
    assert len(resp.json["messages"]) == 1


def test_stop_answers_every_waiting_consumer_at_once(app, waiters):
    import falcon.testing

    client = falcon.testing.TestClient(app)
    client.simulate_post("/v1/topics", json={"name": "t"})
    statuses = []

    def poll():
        resp = client.simulate_get("/v1/topics/t/consume", params={"wait": "10s"})
        statuses.append(resp.status_code)

    threads = [threading.Thread(target=poll) for _ in range(5)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    app.drain()
    for thread in threads:
        thread.join(5)
    assert statuses == [204] * 5


# -- bounded per-topic state ------------------------------------------------------


class Events:
    """A listener whose events the test delivers itself (always live)."""

    def __init__(self) -> None:
        self.handlers: dict[Event, list] = {}
        self.live: list = []

    def on(self, event, handler):
        self.handlers.setdefault(event, []).append(handler)

    def on_live(self, handler):
        self.live.append(handler)
        handler(True)

    def start(self):
        pass

    def stop(self):
        pass

    def publish(self, event: Event, topic: str) -> None:
        for handler in self.handlers[event]:
            handler(topic)


def test_topics_nobody_waits_on_are_forgotten_past_the_bound():
    events = Events()
    waiters = Waiters(events, max_topics=3)
    busy = waiters.generation("busy")
    waiting = threading.Thread(target=waiters.wait, args=("busy", busy, 10.0))
    waiting.start()
    deadline = time.monotonic() + 5
    while not waiters._topics["busy"].waiting:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    for topic in ("a", "b", "c", "d"):
        waiters.generation(topic)
    assert len(waiters) == 3
    assert "busy" in waiters._topics  # the least recently used, but waited on
    assert waiters.take_evictions() == 2
    events.publish(Event.MESSAGES, "busy")
    waiting.join(5)
    assert not waiting.is_alive()


def test_a_forgotten_topic_reads_as_moved_on():
    events = Events()
    waiters = Waiters(events, max_topics=1)
    seen = waiters.generation("t")
    waiters.generation("other")  # forgets t
    assert not waiters.quiet("t", seen)
    # It returns at once rather than sleeping out an hour: the consumer looks
    # again (the join's bound only guards against a hang).
    waiting = threading.Thread(target=waiters.wait, args=("t", seen, 3600.0))
    waiting.start()
    waiting.join(60)
    assert not waiting.is_alive()
    assert waiters.generation("t") != seen


def test_messages_for_a_topic_nobody_waits_on_cost_nothing():
    events = Events()
    waiters = Waiters(events)
    for i in range(100):
        events.publish(Event.MESSAGES, f"t{i}")
    assert len(waiters) == 0


def test_a_changed_topic_loses_its_state_and_wakes_its_consumers():
    events = Events()
    waiters = Waiters(events)
    seen = waiters.generation("t")
    waiters.remember_empty("k", "t", seen, None, 1000)
    waiting = threading.Thread(target=waiters.wait, args=("t", seen, 10.0))
    waiting.start()
    deadline = time.monotonic() + 5
    while not waiters._topics["t"].waiting:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    events.publish(Event.TOPIC_CHANGED, "t")
    waiting.join(5)
    assert not waiting.is_alive()
    assert len(waiters) == 0
    assert waiters.known_empty("k", "t", 1000) is None


def test_a_remembered_mark_spares_writes_until_it_would_run_out():
    waiters = Waiters(Events())
    until = waiters.mark_until("t", "e1", 1000, 5000)
    assert until == 1000 + 5000 + MARK_SLACK_MS
    waiters.marked("t", "e1", until)
    assert waiters.mark_until("t", "e1", 1000, 5000) is None
    # Still more than half the slack past the wait: no write.
    later = until - 5000 - MARK_SLACK_MS // 2
    assert waiters.mark_until("t", "e1", later, 5000) is None
    due = waiters.mark_until("t", "e1", later + 1, 5000)
    assert due == later + 1 + 5000 + MARK_SLACK_MS
    assert waiters.mark_until("t", "e2", 1000, 5000) is not None  # recreated
    waiters.marked("t", "e1", 10)  # an older mark does not replace a later one
    assert waiters.mark_until("t", "e1", 1000, 5000) is None


def test_a_remembered_mark_goes_with_the_topic_s_state():
    events = Events()
    waiters = Waiters(events, max_topics=1)
    waiters.marked("t", "e", 10**12)
    events.publish(Event.TOPIC_CHANGED, "t")
    assert waiters.mark_until("t", "e", 0, 0) is not None
    waiters.marked("t", "e", 10**12)
    waiters.generation("other")  # past the bound: t is forgotten
    assert waiters.mark_until("t", "e", 0, 0) is not None


def test_close_ends_the_listener_thread_and_close_apps_closes_every_app():
    def listeners() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "narad-notifications"]

    before = set(listeners())
    clients = [testing.client() for _ in range(2)]
    for client in clients:
        # The listener starts with the first topic record a worker keeps.
        assert client.simulate_post("/v1/topics", json={"name": "t"}).status_code == 201
    started = set(listeners()) - before
    assert len(started) == 2
    testing.close_apps()
    deadline = time.monotonic() + 10
    while any(t.is_alive() for t in started):
        assert time.monotonic() < deadline, "a listener outlived its app's close"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("wait_ms", "step_s"), [(10_000, 0.05), (5_000, 0.05), (1_000, 0.01), (30, 0.0003)]
)
def test_long_polls_end_on_a_grid_at_most_one_percent_late(wait_ms, step_s):
    starts = [1000.0 + i * step_s / 7 for i in range(7)]  # all within one step
    ends = [poll_deadline(start, wait_ms) for start in starts]
    for start, end in zip(starts, ends, strict=True):
        assert 0 <= end - (start + wait_ms / 1000) <= step_s * (1 + 1e-9)
        assert end / step_s == pytest.approx(round(end / step_s))
    # They end together, but for those a grid line falls after.
    assert len({round(end, 9) for end in ends}) <= 2


def test_a_poll_that_does_not_wait_ends_when_it_starts():
    assert poll_deadline(1000.0013, 0) == 1000.0013


# -- GreenCondition: what consumers wait on in a gevent worker ----------------


def test_a_green_wait_runs_out_with_the_lock_held_again():
    lock = threading.Lock()
    cond = GreenCondition(lock)
    with lock:
        started = time.monotonic()
        cond.wait(0.05)
        assert time.monotonic() - started >= 0.05
        assert lock.locked()


def test_a_green_wait_counts_from_the_clock_not_the_loop_s_last_turn():
    lock = threading.Lock()
    cond = GreenCondition(lock)
    gevent.sleep(0)
    time.sleep(0.2)  # a long turn (not patched: the loop does not run)
    with lock:
        started = time.monotonic()
        cond.wait(0.1)
        assert time.monotonic() - started >= 0.1


def test_green_waits_are_woken_at_once_in_the_order_they_began():
    lock = threading.Lock()
    cond = GreenCondition(lock)
    woken = []

    def consumer(i):
        with lock:
            cond.wait(10.0)
            woken.append(i)

    consumers = [gevent.spawn(consumer, i) for i in range(3)]
    gevent.sleep(0)  # each is waiting
    started = time.monotonic()
    with lock:
        cond.notify_all()
    gevent.joinall(consumers, timeout=5)
    assert woken == [0, 1, 2]
    assert time.monotonic() - started < 5


def test_a_wait_woken_twice_at_once_leaves_the_next_wait_alone():
    lock = threading.Lock()
    cond = GreenCondition(lock)
    second = []

    def consumer():
        with lock:
            cond.wait(0)  # its timer and the notify below both switch to it
            started = time.monotonic()
            cond.wait(0.1)
            second.append(time.monotonic() - started)

    waiting = gevent.spawn(consumer)
    gevent.sleep(0)
    with lock:
        cond.notify_all()
    waiting.join(5)
    assert second and second[0] >= 0.1


def test_green_consumers_wake_when_their_topic_is_published(monkeypatch):
    monkeypatch.setattr(waiters_module, "_condition_class", lambda: GreenCondition)
    events = Events()
    waiters = Waiters(events)
    seen = waiters.generation("t")
    waiting = [gevent.spawn(waiters.wait, "t", seen, 10.0) for _ in range(3)]
    idle = gevent.spawn(waiters.wait, "other", waiters.generation("other"), 0.05)
    gevent.sleep(0)
    assert waiters._topics["t"].waiting == 3
    started = time.monotonic()
    events.publish(Event.MESSAGES, "t")
    gevent.joinall([*waiting, idle], timeout=5)
    assert all(g.dead for g in [*waiting, idle])
    assert time.monotonic() - started < 5
    assert waiters._topics["t"].cond is None  # nobody waits: the condition goes
