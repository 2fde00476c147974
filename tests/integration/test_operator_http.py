"""An operator's afternoon against real nodes: the ``narad`` CLI in its own
process, ``/metrics`` aggregated across gunicorn workers, the dashboard's
and the alerts' metrics, and a node run the way the systemd unit runs it
(a hand-run gunicorn with conf/gunicorn.conf.py): readiness notice, JSON
logs, a clean stop on SIGTERM."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

import narad_redis
from narad.config import Config
from narad.storage import Entry
from narad.storage import PayloadKind
from tests.httpclient import ADMIN
from tests.nodes import ROOT
from tests.nodes import free_port
from tests.nodes import wait_ready


def scrape(node) -> dict[tuple[str, tuple], float]:
    response = node.client().get("/metrics")
    assert response.status == 200
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.data.decode())
        for s in family.samples
    }


@pytest.fixture
def narad(node, tmp_path):
    """``narad ARGS`` in a process of its own against the session's node:
    (exit status, stdout, stderr)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
        "NARAD_URL": node.base,
        "NARAD_USER": ADMIN[0],
        "NARAD_PASSWORD": ADMIN[1],
        "NARAD_CLI_CONFIG": str(tmp_path / "contexts.json"),
    }

    def run(
        *args: str,
        stdin: bytes | None = None,
        timeout: float = 120,
        **overrides: str | None,
    ):
        """``overrides``: environment variables to set, or drop (None)."""
        here = {**env, **overrides}
        ran = subprocess.run(
            [sys.executable, "-m", "narad.cli", *args],
            input=stdin,
            capture_output=True,
            env={k: v for k, v in here.items() if v is not None},
            timeout=timeout,
        )
        return ran.returncode, ran.stdout.decode(), ran.stderr.decode()

    run.env = env
    return run


# -- the CLI -------------------------------------------------------------------


def test_an_operator_produces_a_file_follows_and_replays(narad, topic, tmp_path):
    schema = '{"type": "object", "required": ["n"]}'
    code, out, err = narad(
        "topic", "create", topic, "--partitions", "3", "--schema", schema
    )
    assert code == 0, err
    lines = tmp_path / "events.txt"
    lines.write_text("".join(json.dumps({"n": i}) + "\n" for i in range(10_000)))
    code, out, err = narad("produce", topic, "--file", str(lines))
    assert code == 0, err
    assert json.loads(out) == {"topic": topic, "accepted": 10_000, "duplicates": 0}

    # A follower started before more messages come: it takes what is there
    # and waits for the rest.
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "narad.cli",
            "consume",
            topic,
            "--follow",
            "--max",
            "10100",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=narad.env,
    )
    time.sleep(1.0)
    more = "".join(json.dumps({"n": 10_000 + i}) + "\n" for i in range(100))
    code, _, err = narad("produce", topic, stdin=more.encode())
    assert code == 0, err
    out, err = follower.communicate(timeout=120)
    assert follower.returncode == 0, err
    seen = [json.loads(line) for line in out.decode().splitlines()]
    assert sorted(m["payload"]["n"] for m in seen) == list(range(10_100))
    code, out, _ = narad("topic", "info", topic)
    stats = json.loads(out)["partition_stats"]
    assert sum(p["next_offset"] for p in stats) == 10_100
    assert sum(p["in_flight"] for p in stats) == 0  # all acked

    code, out, _ = narad(
        "replay", topic, "--partition", "1", "--from", "5", "--max", "20"
    )
    replayed = [json.loads(line) for line in out.splitlines()]
    assert [m["offset"] for m in replayed] == list(range(5, 25))
    assert {m["partition"] for m in replayed} == {1}


def test_a_consumer_whose_reader_goes_away_gives_its_leases_back(narad, topic):
    # `narad consume T | head -1`: head leaves after one line, the next write
    # fails. Messages leased but not acked must not stay held for the
    # visibility timeout (an hour here), and no traceback is printed.
    narad("topic", "create", topic, "--partitions", "1", "--visibility-timeout", "1h")
    lines = "".join(json.dumps({"n": i, "pad": "x" * 1000}) + "\n" for i in range(300))
    assert narad("produce", topic, stdin=lines.encode())[0] == 0
    for ack in ("--ack", "--no-ack"):
        consumer = subprocess.Popen(
            [sys.executable, "-m", "narad.cli", "consume", topic, ack],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=narad.env,
        )
        assert json.loads(consumer.stdout.readline())["topic"] == topic
        consumer.stdout.close()  # more than the pipe holds is still unwritten
        err = consumer.stderr.read().decode()
        consumer.wait(60)
        assert "Traceback" not in err
    # Every message can be taken again now: none was acked unread, none is
    # still leased.
    _, out, _ = narad("consume", topic)
    assert sorted(json.loads(m)["payload"]["n"] for m in out.splitlines()) == list(
        range(300)
    )


def test_exit_statuses_scripts_rely_on(narad, topic):
    assert narad("topic", "info", topic)[0] == 1  # 404: refused
    assert narad("topic", "create", topic, "--partitions", "0")[0] == 2  # usage
    code, _, err = narad("--url", f"http://127.0.0.1:{free_port()}", "topic", "ls")
    assert code == 3  # nobody there
    assert err.startswith("narad: cannot reach")
    narad("topic", "create", topic)
    code, _, err = narad("produce", topic, "--partition", "9", "x")
    assert code == 1
    assert err.startswith("narad: ") and "partition" in err


def test_schema_check_is_the_dry_run(narad, topic):
    v1 = '{"type": "object", "properties": {"n": {"type": "integer"}}}'
    assert narad("topic", "create", topic, "--schema", v1)[0] == 0
    wider = (
        '{"type": "object", "properties": {"n": {"type": "integer"}, '
        '"note": {"type": "string"}}}'
    )
    code, out, err = narad("schema", "check", topic, wider)
    assert code == 0, err
    report = json.loads(out)
    assert (report["compatible"], report["mode"]) == (True, "BACKWARD")
    narrower = '{"type": "object", "properties": {"n": {"type": "string"}}}'
    code, out, err = narad("schema", "check", topic, narrower)
    assert code == 1
    report = json.loads(out)
    assert not report["compatible"]
    assert [v["pointer"] for v in report["violations"]] == ["/properties/n"]
    assert err.startswith("narad: not compatible: 1 violation")
    # Under another mode, asked for: NONE accepts any registrable schema.
    code, out, _ = narad("schema", "check", topic, narrower, "--mode", "none")
    assert (code, json.loads(out)["mode"]) == (0, "NONE")
    # Nothing was stored by any of it.
    code, out, _ = narad("schema", "ls", topic)
    assert json.loads(out)["current_version"] == 1
    code, _, err = narad("schema", "check", topic, "{", "--against", "1")
    assert code == 2 and "JSON" in err


def test_user_commands_drive_the_users_api(narad, topic):
    name = f"cli-{topic}"[:64]
    password = "correct horse battery staple"
    code, out, err = narad(
        "user",
        "create",
        name,
        "--grant",
        f"produce:{topic}",
        "--grant",
        f"consume:{topic},other.*",
        "--password-stdin",
        stdin=f"{password}\n".encode(),
    )
    assert code == 0, err
    created = json.loads(out)
    assert created["username"] == name
    assert {g["action"]: g["patterns"] for g in created["grants"]} == {
        "produce": [topic],
        "consume": [topic, "other.*"],
    }
    code, out, _ = narad("user", "ls")
    assert name in [u["username"] for u in json.loads(out)]
    assert narad("topic", "create", topic)[0] == 0

    # As the new user, from a context holding its credentials.
    as_user = {"NARAD_USER": None, "NARAD_PASSWORD": None}
    code, _, err = narad(
        "context",
        "add",
        "mine",
        "--url",
        narad.env["NARAD_URL"],
        "--user",
        name,
        "--password-stdin",
        stdin=f"{password}\n".encode(),
        **as_user,
    )
    assert code == 0, err
    assert narad("produce", topic, "hello", **as_user)[0] == 0
    code, out, err = narad("user", "info", name, **as_user)
    assert code == 0, err
    assert json.loads(out)["username"] == name
    code, _, err = narad("topic", "rm", topic, "--yes", **as_user)
    assert code == 1
    assert err.startswith(f"narad: user {name} may not delete topic {topic}")
    code, _, err = narad("user", "ls", **as_user)
    assert code == 1
    # A wrong password: refused (401), the node's message printed.
    code, _, err = narad("topic", "ls", NARAD_PASSWORD="wrong-password")
    assert code == 1 and "credentials" in err

    # Its own password change (current one from the context), then an admin's
    # grant change and deletion.
    code, _, err = narad(
        "user", "passwd", "--password-stdin", stdin=b"a new long password\n", **as_user
    )
    assert code == 0, err
    assert narad("topic", "info", topic, **as_user)[0] == 1  # the old one is gone
    code, _, _ = narad(
        "topic", "info", topic, NARAD_USER=name, NARAD_PASSWORD="a new long password"
    )
    assert code == 0
    code, out, _ = narad("user", "grants", name, "--grant", f"admin:{topic}")
    assert [g["action"] for g in json.loads(out)["grants"]] == ["admin"]
    assert narad("user", "rm", name, "--yes")[0] == 0
    assert narad("user", "info", name)[0] == 1


# -- metrics -------------------------------------------------------------------


def eventually(node, check, seconds: float = 25.0):
    """Scrape until ``check(samples)`` holds (each worker reads the topics'
    positions again once its last read is metrics.topic_stats_ttl_s old)."""
    deadline = time.monotonic() + seconds
    while True:
        seen = scrape(node)
        if check(seen) or time.monotonic() > deadline:
            return seen
        time.sleep(0.25)


def settled(node, key, seconds: float = 25.0) -> float:
    """``key``'s value once every worker wrote out what it counted (or when
    ``seconds`` are up): a worker writes on an idle tick (every second) once
    its counts are :data:`narad.metrics.FLUSH_S` old, so earlier tests'
    requests may still land in the first 2 s after them."""
    deadline = time.monotonic() + seconds
    value = scrape(node).get(key, 0)
    while time.monotonic() < deadline:
        time.sleep(2.5)
        again = scrape(node).get(key, 0)
        if again == value:
            break
        value = again
    return value


def test_request_counts_add_up_across_workers(node, topic):
    # Per-topic series cover the first metrics.max_topics names (1,000) of
    # the session's node, which holds every test's topics: this one sorts
    # first.
    topic = f"0-{topic}"[:249]
    route = "/v1/topics/{name}/produce"
    key = (
        "narad_http_requests_total",
        (("method", "POST"), ("route", route), ("status", "202")),
    )
    before = settled(node, key)
    node.client().post("/v1/topics", {"name": topic})
    # Fresh connections: the kernel spreads them over both workers.
    for i in range(40):
        client = node.client()
        assert client.post(f"/v1/topics/{topic}/produce", f"m{i}").status == 202
        client.close()
    # Each worker writes its counts out within about a second.
    seen = eventually(node, lambda seen: seen.get(key, 0) - before == 40)
    assert seen.get(key, 0) - before == 40
    assert not [k for k in seen if f"/v1/topics/{topic}" in str(k)]
    label = (("topic", topic),)
    produced = ("narad_topic_messages_produced_total", label)
    seen = eventually(node, lambda seen: produced in seen)
    assert seen[produced] == 40
    assert seen[("narad_topic_backlog_messages", label)] == 40
    node.client().delete(f"/v1/topics/{topic}")
    seen = eventually(node, lambda seen: produced not in seen)
    assert not [k for k in seen if k[1] == label]


def test_topic_metrics_leave_out_what_retention_no_longer_keeps(
    node, topic, storage_url
):
    # Messages that aged out while nothing wrote to the topic: no consumer
    # can get them, so they are neither backlog nor an unacked message
    # waiting (which the alerts would page for).
    topic = f"0-{topic}"[:249]
    hour = 3_600_000
    http = node.client()
    assert http.post("/v1/topics", {"name": topic, "retention_ms": hour}).status == 201
    storage = narad_redis.connect(storage_url, Config.load(env={}))
    try:
        meta = storage.get_topic(topic)
        aged = int(time.time() * 1000) - 2 * hour
        entries = [Entry(0, b"", b"old", PayloadKind.TEXT)] * 3
        assert storage.append(meta, entries, schema_version=0, now_ms=aged).count == 3
    finally:
        storage.close()
    label = (("topic", topic),)
    produced = ("narad_topic_messages_produced_total", label)
    seen = eventually(node, lambda seen: seen.get(produced) == 3)
    assert seen[("narad_topic_backlog_messages", label)] == 0
    assert seen[("narad_topic_oldest_unacked_age_seconds", label)] == 0
    assert seen[("narad_topic_messages_consumed_total", label)] == 3
    http.delete(f"/v1/topics/{topic}")
    http.close()


GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$topic": ".*"}


def test_a_scrape_answers_while_the_storage_stalls(tmp_path):
    # A storage that takes connections but does not answer (a stalled disk
    # or host): a scrape must still answer, with the last known figures,
    # well within Prometheus's scrape timeout (10 s), not after the storage
    # socket timeout, when the figures are needed most.
    from tests.httpclient import Client
    from tests.nodes import Node
    from tests.nodes import start_valkey
    from tests.nodes import tcp_url

    storage = start_valkey(tmp_path / "valkey")
    node = Node(
        tmp_path,
        storage_url=tcp_url(storage),
        workers=1,
        env={
            "NARAD_PLUGINS_REDIS_SOCKET_TIMEOUT_MS": "60000",
            "NARAD_METRICS_TOPIC_STATS_WAIT_MS": "500",
            "NARAD_METRICS_TOPIC_STATS_TTL_S": "0",
        },
    ).start()
    client = Client(node.base, timeout=20)
    try:
        assert client.get("/metrics").status == 200
        time.sleep(2.5)  # the storage figures are read again after 2 s
        os.kill(storage.process.pid, signal.SIGSTOP)
        for _ in range(2):
            response = client.get("/metrics")
            assert response.status == 200
            assert b"narad_storage_durable 1.0" in response.data
    finally:
        os.kill(storage.process.pid, signal.SIGCONT)
        client.close()
        node.stop()
        storage.stop()


def metric_names(expression: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    names: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            names.add(node.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            walk(node.vector_selector)
        elif isinstance(node, promql_parser.BinaryExpr):
            walk(node.lhs)
            walk(node.rhs)
        elif isinstance(node, promql_parser.Call):
            for arg in node.args:
                walk(arg)
        elif isinstance(
            node,
            promql_parser.AggregateExpr
            | promql_parser.ParenExpr
            | promql_parser.UnaryExpr
            | promql_parser.SubqueryExpr,
        ):
            walk(node.expr)

    walk(promql_parser.parse(expression))
    return names


def dashboard_expressions() -> list[str]:
    dashboard = json.loads((ROOT / "conf/grafana/narad.json").read_text())
    found = [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found += re.findall(r"label_values\((\w+),", variable["definition"])
    return found


def alert_expressions() -> list[str]:
    rules = yaml.safe_load((ROOT / "conf/prometheus/alerts.yml").read_text())
    return [rule["expr"] for group in rules["groups"] for rule in group["rules"]]


def test_alerts_cover_what_the_issue_asks():
    rules = yaml.safe_load((ROOT / "conf/prometheus/alerts.yml").read_text())
    alerts = {
        rule["alert"]: rule for group in rules["groups"] for rule in group["rules"]
    }
    for name in (
        "NaradStorageNotDurable",
        "NaradStorageMemoryHigh",
        "NaradBacklogGrowing",
        "NaradOldestUnackedOverVisibilityTimeout",
        "NaradHighErrorRate",
        "NaradValidationCapacitySaturated",
    ):
        rule = alerts[name]
        assert rule["annotations"]["summary"] and rule["labels"]["severity"]


def test_every_metric_the_dashboard_and_alerts_name_exists_on_a_node(node, topic):
    # Traffic that makes every labelled series appear.
    client = node.client()
    client.post("/v1/topics", {"name": topic, "schema": {"type": "object"}})
    client.post(f"/v1/topics/{topic}/produce", "{}")
    got = client.get(f"/v1/topics/{topic}/consume").json()
    client.post(f"/v1/topics/{topic}/ack?receipt_handle={got['receipt_handle']}")
    expressions = dashboard_expressions() + alert_expressions()
    wanted = set().union(*(metric_names(e) for e in expressions))
    assert len(wanted) > 25
    seen = eventually(node, lambda seen: wanted <= {name for name, _ in seen})
    missing = wanted - {name for name, _ in seen}
    assert not missing, f"named but not exposed: {sorted(missing)}"


# -- a node as the systemd unit runs it --------------------------------------------


def gunicorn_node(
    tmp_path: Path, storage_url: str, port: int, **extra: str
) -> tuple[subprocess.Popen, Path]:
    """``gunicorn -c conf/gunicorn.conf.py`` as the systemd unit runs a node,
    two workers on ``port``: the process and its log. ``extra`` adds to the
    environment; PROMETHEUS_MULTIPROC_DIR is set only there."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env.update(
        {
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            "NARAD_SERVER_BIND": f"127.0.0.1:{port}",
            "NARAD_SERVER_WORKERS": "2",
            "NARAD_STORAGE_URL": storage_url,
            "NARAD_STORAGE_DATA_DIR": str(tmp_path / "data"),
            "NARAD_VALIDATION_CAPACITY_DIR": str(tmp_path / "capacity"),
            "NARAD_ADMIN_PASSWORD": ADMIN[1],
            **extra,
        }
    )
    conf = str(ROOT / "conf/gunicorn.conf.py")
    log = tmp_path / "node.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", conf],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    return process, log


def test_a_gunicorn_node_notifies_systemd_logs_json_and_stops_on_sigterm(
    storage_url, tmp_path
):
    notify = tmp_path / "notify.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(notify))
    listener.settimeout(60)
    port = free_port()
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    process, log = gunicorn_node(
        tmp_path,
        storage_url,
        port,
        NOTIFY_SOCKET=str(notify),
        NARAD_LOG_FORMAT="json",
        NARAD_SERVER_ACCESS_LOG="json",
        NARAD_SECURITY_SCRYPT_LOG2_N="10",
        PROMETHEUS_MULTIPROC_DIR=str(metrics_dir),
    )
    try:
        notice = listener.recv(4096).decode()
        assert notice.startswith("READY=1\n"), notice
        # Ready means serving: the first request after the notice is answered.
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn.sendall(
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-ID: probe-1\r\n\r\n"
        )
        assert conn.recv(100).startswith(b"HTTP/1.1 200")
        conn.close()
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        listener.close()
    lines = log.read_text().splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert {"time", "level", "logger", "pid", "message"} <= set(records[0])
    loggers = {r["logger"] for r in records}
    assert {"gunicorn.error", "narad.guard"} <= loggers
    assert any("Shutting down" in r["message"] for r in records)
    # The access log's line of the probe, JSON like the rest.
    (probe,) = [r for r in records if r.get("request_id") == "probe-1"]
    assert (probe["route"], probe["status"]) == ("/healthz", 200)


@pytest.mark.parametrize(
    ("env", "words"),
    [
        # Read by conf/gunicorn.conf.py itself.
        ({"NARAD_SERVER_WORKERS": "many"}, "`server.workers` ($NARAD_SERVER_WORKERS)"),
        # Found as the master starts (on_starting).
        ({"NARAD_STORAGE_URL": ""}, "`storage.url` is empty"),
        # Else each worker fails on it at boot.
        (
            {
                "NARAD_PLUGINS_REDIS_POOL_SIZE": "0",
                "NARAD_STORAGE_URL": "redis://127.0.0.1:1/0",
            },
            "`plugins.redis.pool_size` ($NARAD_PLUGINS_REDIS_POOL_SIZE)",
        ),
        # Else each worker would die on its first metric.
        (
            {"PROMETHEUS_MULTIPROC_DIR": "/nonexistent/metrics"},
            "PROMETHEUS_MULTIPROC_DIR /nonexistent/metrics is not a directory",
        ),
    ],
)
def test_a_gunicorn_node_with_a_bad_setting_says_why_without_a_traceback(
    tmp_path, env, words
):
    ran = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "conf/gunicorn.conf.py")],
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")]),
            "NARAD_SERVER_BIND": f"127.0.0.1:{free_port()}",
            "NARAD_LOG_FORMAT": "json",
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert ran.returncode == 2, ran.stderr
    assert words in ran.stderr
    assert "Traceback" not in ran.stderr


def _workers(process: subprocess.Popen) -> set[int]:
    out = subprocess.run(
        ["pgrep", "-P", str(process.pid)], capture_output=True, text=True
    ).stdout
    return {int(pid) for pid in out.split()}


def _reload(process: subprocess.Popen, base: str, log: Path) -> set[int]:
    """SIGHUP, as `systemctl reload narad` sends; wait until a new generation
    of workers serves alone. The new workers' pids."""
    before = _workers(process)
    process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, log.read_text()[-3000:]
        workers = _workers(process)
        if len(workers) == 2 and not workers & before:
            break
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    wait_ready(base, process, log)
    return workers


@pytest.mark.parametrize(
    ("broken", "words"),
    [
        ("[security\nenabled = true\n", "is not TOML"),
        ('[security]\nenabled = "maybe"\n', "`security.enabled` ({toml}): expected"),
        ("[plugins.redis]\npool_size = 0\n", "`plugins.redis.pool_size` ({toml})"),
    ],
    ids=["not-toml", "bad-value", "bad-plugin-value"],
)
def test_a_reload_with_a_broken_file_keeps_the_node_on_its_settings(
    storage_url, tmp_path, topic, broken, words
):
    # `systemctl reload narad` (SIGHUP to gunicorn's master) re-reads
    # narad.toml: a file that does not load is refused and logged, and the
    # node, its new workers included, serves on with the settings it had; the
    # fixed file then takes effect at the next reload.
    from tests.httpclient import Client

    toml = tmp_path / "narad.toml"
    toml.write_text("[security]\nenabled = true\n")
    port = free_port()
    process, log = gunicorn_node(
        tmp_path,
        storage_url,
        port,
        NARAD_CONFIG=str(toml),
        NARAD_SECURITY_SCRYPT_LOG2_N="10",
    )
    base = f"http://127.0.0.1:{port}"
    anonymous = Client(base, auth=None)
    http = Client(base)
    try:
        wait_ready(base, process, log)
        assert http.post("/v1/topics", {"name": topic}).status == 201
        toml.write_text(broken)
        workers = _reload(process, base, log)
        assert words.format(toml=toml) in log.read_text()
        assert http.get("/healthz").status == 200
        assert anonymous.get("/v1/topics").status == 401  # security still on
        assert http.post(f"/v1/topics/{topic}/produce", "m").status == 202
        got = http.get(f"/v1/topics/{topic}/consume")
        assert (got.status, got.json()["payload"]) == (200, "m")
        assert _workers(process) == workers  # none died since
        toml.write_text("[security]\nenabled = false\n")
        _reload(process, base, log)
        assert anonymous.get("/v1/topics").status == 200
    finally:
        anonymous.close()
        http.close()
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode == 0, log.read_text()[-2000:]


def test_a_gunicorn_node_aggregates_its_workers_metrics_as_written(
    storage_url, tmp_path
):
    # `gunicorn -c conf/gunicorn.conf.py`, as the README writes it: no
    # PROMETHEUS_MULTIPROC_DIR. Each scrape must count every worker's
    # requests, not those of the worker that answered it.
    from tests.httpclient import Client

    port = free_port()
    process, log = gunicorn_node(tmp_path, storage_url, port)
    base = f"http://127.0.0.1:{port}"

    def healthz_count() -> float:
        client = Client(base)  # the admin, on a new connection: any worker
        try:
            text = client.get("/metrics").data.decode()
        finally:
            client.close()
        samples = {
            (s.name, s.labels.get("route")): s.value
            for family in text_string_to_metric_families(text)
            for s in family.samples
        }
        return samples.get(("narad_http_requests_total", "/healthz"), 0.0)

    try:
        wait_ready(base, process, log)
        for _ in range(20):  # each on its own connection: both workers get some
            client = Client(base, auth=None)
            assert client.get("/healthz").status == 200
            client.close()
        deadline = time.monotonic() + 15
        while healthz_count() != 20 and time.monotonic() < deadline:
            time.sleep(0.25)  # each worker writes its counts once a second
        assert [healthz_count() for _ in range(4)] == [20] * 4
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    assert process.returncode == 0, log.read_text()[-2000:]
