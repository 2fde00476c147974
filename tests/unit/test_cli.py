"""The ``narad`` CLI in-process: click's CliRunner over an app served through
httpx's WSGI transport (fakeredis storage). tests/integration/test_operator_http.py
drives a real node."""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys

import httpx
import pytest
from click.testing import CliRunner
from narad_client import Client

from narad import testing
from narad.cli import cli
from narad.cli import main
from narad.cli.base import Session
from narad.cli.contexts import ContextFile
from narad.cli.contexts import resolve


@pytest.fixture
def app(tmp_path):
    return testing.make_app(testing.make_config(tmp_path))


@pytest.fixture(autouse=True)
def contexts_file(tmp_path, monkeypatch):
    path = tmp_path / "cli" / "contexts.json"
    monkeypatch.setenv("NARAD_CLI_CONFIG", str(path))
    for name in (
        "NARAD_URL",
        "NARAD_USER",
        "NARAD_PASSWORD",
        "NARAD_CONTEXT",
        "NARAD_RETRIES",
    ):
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def narad(app):
    """Run ``narad ARGS`` against the in-process app: (exit code, stdout, stderr)."""
    runner = CliRunner()

    def run(*args: str, input: str | bytes | None = None):
        session = Session(transport=httpx.WSGITransport(app=app))
        result = runner.invoke(cli, list(args), obj=session, input=input)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        return result.exit_code, result.stdout, result.stderr

    return run


def test_topic_lifecycle_with_json_when_piped(narad, topic):
    code, out, _ = narad(
        "topic",
        "create",
        topic,
        "--partitions",
        "2",
        "--retention",
        "2h",
        "--visibility-timeout",
        "45s",
    )
    assert code == 0
    record = json.loads(out)
    assert (record["partitions"], record["retention_ms"]) == (2, 7_200_000)
    assert record["visibility_timeout_ms"] == 45_000
    code, out, _ = narad("topic", "ls")
    assert topic in [r["name"] for r in json.loads(out)]
    code, out, _ = narad("topic", "alter", topic, "--max-in-flight", "7")
    assert json.loads(out)["max_in_flight_per_partition"] == 7
    code, out, _ = narad("topic", "info", topic)
    assert [p["index"] for p in json.loads(out)["partition_stats"]] == [0, 1]
    assert narad("topic", "rm", topic, "--yes")[0] == 0
    code, _, err = narad("topic", "info", topic)
    assert code == 1
    assert err.strip() == f"narad: topic {topic} not found"


def test_tables_for_a_person(narad):
    topic = "tables"  # short: a table 80 columns wide wraps long names
    narad("topic", "create", topic)
    code, out, _ = narad("topic", "info", topic, "--table")
    assert code == 0
    assert "retention" in out and "7d" in out and "next offset" in out
    code, out, _ = narad("topic", "ls", "--table")
    assert topic in out and "partitions" in out


def test_exit_statuses(narad, topic, app):
    assert narad("topic", "info", "no-such-topic")[0] == 1  # refused (404)
    assert narad("topic", "create", topic, "--retention", "soon")[0] == 2  # usage
    assert narad("topic", "alter", topic)[0] == 2  # nothing to change
    assert narad("topic", "rm", topic)[0] == 2  # no terminal, no --yes
    runner = CliRunner()
    gone = runner.invoke(cli, ["--url", "http://127.0.0.1:9", "topic", "ls"])
    assert gone.exit_code == 3  # unavailable
    assert gone.stderr.startswith("narad: cannot reach http://127.0.0.1:9")


def test_produce_lines_in_batches_and_name_the_refused_line(narad, topic, tmp_path):
    schema = '{"type": "object", "required": ["id"]}'
    narad("topic", "create", topic, "--partitions", "1", "--schema", schema)
    lines = tmp_path / "lines.txt"
    body = [json.dumps({"id": i}) for i in range(250)]
    body[7] = ""  # skipped
    lines.write_text("\n".join(body) + "\n")
    code, out, _ = narad("produce", topic, "-f", str(lines), "--batch-size", "100")
    assert code == 0
    assert json.loads(out) == {"topic": topic, "accepted": 249, "duplicates": 0}
    bad = tmp_path / "bad.txt"
    bad.write_text('{"id": 1}\n{"id": 2}\n{"nope": 3}\n')
    code, _, err = narad("produce", topic, "-f", str(bad), "--batch-size", "2")
    assert code == 1
    assert "line 3: " in err and "missing property 'id'" in err
    assert "(2 messages stored before line 3; none from line 3 on)" in err


def test_produce_keeps_each_batch_under_the_nodes_body_limit(narad, topic, tmp_path):
    # Each line is stored alone, but 100 of them are over the node's 1 MiB
    # request body: batches are cut by size too.
    narad("topic", "create", topic, "--partitions", "1")
    lines = tmp_path / "big.jsonl"
    lines.write_text(
        "".join(json.dumps({"n": i, "pad": '"' * 10_000}) + "\n" for i in range(150))
    )
    code, out, err = narad("produce", topic, "-f", str(lines))
    assert code == 0, err
    assert json.loads(out)["accepted"] == 150
    _, out, _ = narad("replay", topic, "-p", "0")
    assert [json.loads(m)["payload"]["n"] for m in out.splitlines()] == list(range(150))


def test_the_cli_knows_the_nodes_body_limit():
    from narad.cli.messages import MAX_REQUEST_BYTES
    from narad.http.body import MAX_BODY

    assert MAX_REQUEST_BYTES == MAX_BODY


class LostAnswers(httpx.WSGITransport):
    """The node stores each batch from the ``first`` on, but its answer never
    comes (a lost connection, a timeout)."""

    def __init__(self, app, first: int, last: int | None = None) -> None:
        super().__init__(app=app)
        self.first, self.last = first, last
        self.batches = 0

    def handle_request(self, request):
        response = super().handle_request(request)
        if request.url.path.endswith("/produce/batch"):
            self.batches += 1
            if self.first <= self.batches <= (self.last or self.batches):
                raise httpx.ReadTimeout("timed out", request=request)
        return response


def test_produce_retries_a_lost_answer_and_stores_nothing_twice(app, topic):
    # The batch carries an idempotency key (narad_client's, the same on each
    # attempt): sent again, it is not stored again.
    runner = CliRunner()
    session = Session(transport=httpx.WSGITransport(app=app))
    runner.invoke(cli, ["topic", "create", topic, "--partitions", "1"], obj=session)
    lost = LostAnswers(app, first=2, last=2)
    result = runner.invoke(
        cli,
        ["produce", topic, "--batch-size", "2"],
        obj=Session(transport=lost),
        input="a\nb\nc\nd\ne\n",
    )
    assert result.exit_code == 0, result.stderr
    assert lost.batches == 4  # the second sent twice
    assert json.loads(result.stdout)["accepted"] == 5
    session = Session(transport=httpx.WSGITransport(app=app))
    replayed = runner.invoke(cli, ["replay", topic, "-p", "0"], obj=session)
    payloads = [json.loads(m)["payload"] for m in replayed.stdout.splitlines()]
    assert payloads == ["a", "b", "c", "d", "e"]


def test_produce_without_an_answer_does_not_claim_nothing_was_stored(app, topic):
    # No answer to the second batch, on every try: the CLI cannot know
    # whether it was stored.
    runner = CliRunner()
    session = Session(transport=httpx.WSGITransport(app=app))
    runner.invoke(cli, ["topic", "create", topic, "--partitions", "1"], obj=session)
    lost = LostAnswers(app, first=2)
    result = runner.invoke(
        cli,
        ["--retries", "1", "produce", topic, "--batch-size", "2"],
        obj=Session(transport=lost),
        input="a\nb\nc\nd\ne\n",
    )
    assert result.exit_code == 3
    assert lost.batches == 3  # the second, and its one retry
    assert "2 messages stored before line 3" in result.stderr
    assert "lines 3 to 4 may or may not be stored" in result.stderr
    assert "none from line 5 on" in result.stderr
    session = Session(transport=httpx.WSGITransport(app=app))
    replayed = runner.invoke(cli, ["replay", topic, "-p", "0"], obj=session)
    assert len(replayed.stdout.splitlines()) == 4  # they were, once


def test_no_retries_is_one_try(monkeypatch):
    # A node that cannot be reached is unavailable at once with --retries 0
    # (or NARAD_RETRIES=0), without backoff.
    slept = []
    monkeypatch.setattr("narad_client._sync.time.sleep", slept.append)
    for args, env in (
        (["--retries", "0", "topic", "ls"], {}),
        (["topic", "ls"], {"NARAD_RETRIES": "0"}),
        (["topic", "ls"], {}),
    ):
        result = CliRunner().invoke(
            cli, ["--url", "http://127.0.0.1:9", *args], env=env
        )
        assert result.exit_code == 3
    assert len(slept) == 4  # the default: four retries, none for the others


def test_produce_with_an_idempotency_key_stores_each_line_once(narad, topic):
    narad("topic", "create", topic)
    lines = "a\nb\nc\n"
    first = narad("produce", topic, "--idempotency-key", "run-1", input=lines)
    again = narad("produce", topic, "--idempotency-key", "run-1", input=lines)
    assert json.loads(first[1])["duplicates"] == 0
    assert json.loads(again[1]) == {"topic": topic, "accepted": 3, "duplicates": 3}
    single = narad("produce", topic, "one body", "--idempotency-key", "k")
    repeat = narad("produce", topic, "one body", "--idempotency-key", "k")
    assert json.loads(single[1])["duplicates"] == 0
    assert json.loads(repeat[1])["duplicates"] == 1


def test_produce_with_key_and_partition(narad, topic):
    narad("topic", "create", topic, "--partitions", "3")
    narad("produce", topic, "x", "--partition", "2")
    narad("produce", topic, "--key", "k1", input="y\nz\n")
    _, out, _ = narad("replay", topic, "--partition", "2")
    assert json.loads(out.splitlines()[0])["payload"] == "x"
    _, out, _ = narad("consume", topic)
    keys = {json.loads(line)["key"] for line in out.splitlines()}
    assert keys == {None, "k1"}


def test_consume_prints_json_lines_and_acks(narad, topic):
    narad("topic", "create", topic, "--partitions", "1")
    narad(
        "produce", topic, input="".join(f'{{"n": {i}, "f": 1.50}}\n' for i in range(5))
    )
    code, out, _ = narad("consume", topic, "--max", "3", "--batch-size", "2")
    assert code == 0
    printed = out.splitlines()
    assert [json.loads(line)["payload"]["n"] for line in printed] == [0, 1, 2]
    assert '"f": 1.50' in printed[0]  # the payload as produced, not re-encoded
    _, out, _ = narad("consume", topic)  # the rest; the first three were acked
    assert [json.loads(line)["payload"]["n"] for line in out.splitlines()] == [3, 4]
    _, out, _ = narad("topic", "info", topic)
    assert json.loads(out)["partition_stats"][0]["in_flight"] == 0


def test_a_payload_written_on_several_lines_is_printed_on_one(narad, topic):
    # The node keeps a JSON payload as written, line breaks included; the
    # CLI's output is still one JSON object a line.
    narad("topic", "create", topic, "--partitions", "1")
    narad("produce", topic, '{\n  "a": 1.50,\r\n  "b": [1,\n 2]\n}')
    for command in (["consume", topic, "--no-ack"], ["replay", topic, "-p", "0"]):
        _, out, _ = narad(*command)
        (line,) = out.splitlines()
        assert json.loads(line)["payload"] == {"a": 1.5, "b": [1, 2]}
        assert '"a": 1.50' in line  # still as written otherwise


def test_consume_without_ack_gives_the_messages_back(narad, topic):
    narad("topic", "create", topic, "--partitions", "1")
    narad("produce", topic, input="a\nb\n")
    first = narad("consume", topic, "--no-ack")[1].splitlines()
    again = narad("consume", topic)[1].splitlines()
    assert [json.loads(m)["offset"] for m in first] == [0, 1]
    assert [json.loads(m)["offset"] for m in again] == [0, 1]


def test_arguments_that_are_not_utf8(narad, topic):
    # What the shell passes for `narad produce T $'\\xff\\xfeabc'` (Python's
    # surrogate escapes): a body is sent as those bytes; a name or key cannot
    # be sent, which is a usage error, not a traceback.
    narad("topic", "create", topic, "--partitions", "1")
    code, _, err = narad("produce", topic, "\udcff\udcfeabc")
    assert code == 0, err
    _, out, _ = narad("consume", topic)
    message = json.loads(out)
    assert message["payload_encoding"] == "base64"
    assert base64.b64decode(message["payload"]) == b"\xff\xfeabc"
    for args in (
        ["topic", "info", "x\udcff"],
        ["produce", topic, "--key", "\udcff", "x"],
    ):
        code, _, err = narad(*args)
        assert code == 2
        assert err.startswith("narad: ") and "not UTF-8" in err and "xff" in err


def test_replay_reads_a_range_without_leasing(narad, topic):
    narad("topic", "create", topic, "--partitions", "1")
    narad("produce", topic, input="".join(f"m{i}\n" for i in range(10)))
    _, out, _ = narad("replay", topic, "-p", "0", "--from", "3", "--max", "4")
    assert [json.loads(m)["offset"] for m in out.splitlines()] == [3, 4, 5, 6]
    assert all("receipt_handle" not in json.loads(m) for m in out.splitlines())
    _, out, _ = narad("replay", topic, "-p", "0", "--from", "8", "--to", "20")
    assert [json.loads(m)["payload"] for m in out.splitlines()] == ["m8", "m9"]
    assert narad("replay", topic, "-p", "5")[0] == 1


def test_progress_bar_goes_to_standard_error(narad, topic):
    narad("topic", "create", topic)
    code, out, err = narad("produce", topic, "--progress", input="a\nb\n")
    assert code == 0
    assert json.loads(out)["accepted"] == 2
    assert "producing" in err


def test_schema_commands(narad, topic, tmp_path):
    v1 = '{"type": "object", "properties": {"id": {"type": "integer"}}}'
    narad("topic", "create", topic, "--schema", v1)
    v2 = tmp_path / "v2.json"
    v2.write_text(
        '{"type": "object", "properties": {"id": {"type": "integer"}, '
        '"n": {"maximum": 1e3}}}'
    )
    code, out, _ = narad("schema", "set", topic, str(v2))
    assert (code, json.loads(out)["schema_version"]) == (0, 2)
    code, out, err = narad("schema", "get", topic)
    # Stored as sent: the node compacts it but keeps the number as written.
    assert out.strip() == (
        '{"type":"object","properties":{"id":{"type":"integer"},"n":{"maximum":1e3}}}'
    )
    assert "version 2" in err
    assert json.loads(narad("schema", "get", topic, "1")[1]) == json.loads(v1)
    _, out, _ = narad("schema", "ls", topic)
    assert [v["version"] for v in json.loads(out)["versions"]] == [1, 2]
    code, _, err = narad("schema", "set", topic, '{"type": "string"}')
    assert code == 1 and "narad: " in err
    assert narad("schema", "set", topic, "missing.json")[0] == 2
    assert narad("schema", "set", topic, '{"not json')[0] == 2


def test_schema_check_reads_as_a_table_or_json(narad):
    topic = "checked"  # short: the table is 80 columns wide
    v1 = '{"type": "object", "properties": {"id": {"type": "integer"}}}'
    narad("topic", "create", topic, "--schema", v1, "--compatibility", "full")
    narrower = '{"type": "object", "properties": {"id": {"type": "string"}}}'
    code, out, err = narad("schema", "check", topic, narrower, "--table")
    assert code == 1
    assert "not compatible (FULL)" in out and "/properties/id" in out
    assert "forward" in out  # both directions checked
    assert err.startswith("narad: not compatible: 2 violations")
    code, out, _ = narad("schema", "check", topic, v1, "--against", "1", "--table")
    assert (code, out.strip()) == (0, "compatible (FULL)")
    code, out, _ = narad("schema", "check", topic, narrower, "--mode", "none")
    assert (code, json.loads(out)["compatible"]) == (0, True)
    assert narad("schema", "check", topic, v1, "--against", "soon")[0] == 1
    code, out, _ = narad("schema", "check", topic, v1, "--against", "LATEST")
    assert (code, json.loads(out)["compatible"]) == (0, True)
    code, _, err = narad("schema", "check", topic, v1, "--against", "\u00b2")
    assert code == 1 and "Traceback" not in err and "against" in err


def test_children_commands(narad, topic):
    parent, child = f"{topic}-p", f"{topic}-c"
    narad("topic", "create", parent)
    narad("topic", "create", child)
    assert narad("topic", "attach", parent, child, "--delay", "1h")[0] == 0
    _, out, _ = narad("topic", "children", parent)
    assert json.loads(out)["children"][0]["delay_ms"] == 3_600_000
    assert narad("topic", "detach", parent, child)[0] == 0
    assert json.loads(narad("topic", "children", parent)[1])["children"] == []


def test_contexts_are_stored_privately_and_chosen(narad, contexts_file, monkeypatch):
    code, _, err = narad(
        "context",
        "add",
        "prod",
        "--url",
        "http://10.0.0.5:7942",
        "--user",
        "ops",
        "--password-stdin",
        input="s3cret\n",
    )
    assert code == 0, err
    assert stat.S_IMODE(contexts_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(contexts_file.parent.stat().st_mode) == 0o700
    narad("context", "add", "dev", "--url", "http://127.0.0.1:7942", "--no-use")
    _, out, _ = narad("context", "ls")
    listed = {c["name"]: c for c in json.loads(out)}
    assert listed["prod"]["current"] and listed["prod"]["password_stored"]
    assert "s3cret" not in out
    target = resolve(ContextFile(), context=None, url=None, user=None)
    assert (target.url, target.user, target.password) == (
        "http://10.0.0.5:7942",
        "ops",
        "s3cret",
    )
    # The environment overrides the context; a stored password belongs to
    # the context's own user only.
    env = {"NARAD_URL": "http://elsewhere:1", "NARAD_USER": "bob"}
    target = resolve(ContextFile(), context=None, url=None, user=None, env=env)
    assert (target.url, target.user, target.password) == (
        "http://elsewhere:1",
        "bob",
        None,
    )
    target = resolve(ContextFile(), context="dev", url=None, user=None, env={})
    assert (target.url, target.user) == ("http://127.0.0.1:7942", None)
    assert narad("context", "use", "dev")[0] == 0
    assert narad("context", "use", "nope")[0] == 2
    assert narad("--context", "nope", "topic", "ls")[0] == 2
    assert narad("context", "rm", "prod")[0] == 0
    assert "prod" not in contexts_file.read_text()


def test_a_context_with_a_user_needs_a_password_source(narad):
    code, _, err = narad("context", "add", "x", "--url", "http://h:1", "--user", "u")
    assert code == 2 and "--password-stdin" in err


def test_user_grants_parse():
    from narad.cli.users import parse_grant

    assert parse_grant("produce:orders.*,billing") == {
        "action": "produce",
        "patterns": ["orders.*", "billing"],
    }
    for bad in ("produce", "fly:x", "consume:"):
        with pytest.raises(Exception, match="ACTION:PATTERN"):
            parse_grant(bad)


def test_main_returns_exit_statuses(capsys):
    assert main(["--version"]) == 0
    assert main(["topic", "info"]) == 2  # missing argument
    assert main(["--url", "http://127.0.0.1:9", "topic", "ls"]) == 3
    assert "narad: cannot reach" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["context", "ls", "--json"], ["--version"]])
def test_output_that_cannot_be_written_is_an_error_not_a_traceback(command):
    # `narad consume T > out.jsonl` on a full disk.
    with open("/dev/full", "wb") as full:
        ran = subprocess.run(
            [sys.executable, "-m", "narad.cli", *command],
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    err = ran.stderr.decode()
    assert (ran.returncode, err) == (2, "narad: [Errno 28] No space left on device\n")


def test_ctrl_c_is_not_a_refusal(monkeypatch, capsys):
    # Exit status 1 says the node refused; an interrupted command says 130,
    # as `narad consume` does.
    def interrupted(self, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "topics", interrupted)
    assert main(["topic", "ls"]) == 130
    assert "Aborted." in capsys.readouterr().err


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "[]",
        '{"current": 5, "contexts": {}}',
        '{"contexts": {"a": []}}',
        '{"current": "a", "contexts": {"a": {"url": 5}}}',
        '{"current": "a", "contexts": {"a": {"url": "http://h", "user": 1}}}',
        None,  # a directory
    ],
)
@pytest.mark.parametrize(
    "command",
    [["topic", "ls"], ["context", "ls"], ["context", "add", "b", "--url", "http://h"]],
)
def test_a_broken_contexts_file_is_a_usage_error(contexts_file, text, command, capsys):
    contexts_file.parent.mkdir()
    if text is None:
        contexts_file.mkdir()
    else:
        contexts_file.write_text(text)
    assert main([*command, "--no-password"] if "add" in command else command) == 2
    assert f"narad: {contexts_file}" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["notaurl", "ftp://x", "http://[::1", "http://h:x"])
def test_a_url_that_cannot_work_is_a_usage_error(url, capsys, monkeypatch):
    # Not "unavailable" (3): retrying will not help; and never a traceback.
    monkeypatch.delenv("NARAD_URL", raising=False)
    assert main(["--url", url, "topic", "ls"]) == 2
    assert "--url" in capsys.readouterr().err
    monkeypatch.setenv("NARAD_URL", url)
    assert main(["topic", "ls"]) == 2
    assert "NARAD_URL" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "key"),
    [(["--workers", "257"], "`server.workers`"), (["--bind", ""], "`server.bind`")],
)
def test_serve_refuses_an_option_out_of_range(args, key, capsys, monkeypatch):
    from narad.cli import node

    started = []
    monkeypatch.setattr(node, "serve_forever", started.append)
    monkeypatch.delenv("NARAD_CONFIG", raising=False)
    assert main(["serve", *args]) == 2
    assert key in capsys.readouterr().err
    assert not started


# -- errors of the client library ---------------------------------------------


@pytest.mark.parametrize(
    ("status", "exit_code"),
    [(400, 1), (401, 1), (404, 1), (409, 1), (410, 1), (500, 3), (503, 3), (507, 3)],
)
def test_the_nodes_status_is_the_exit_status(status, exit_code):
    answer = httpx.MockTransport(
        lambda request: httpx.Response(status, json={"error": "what went wrong"})
    )
    session = Session(transport=answer, retries=0)
    result = CliRunner().invoke(cli, ["topic", "info", "t"], obj=session)
    assert result.exit_code == exit_code
    assert result.stderr.startswith("narad: what went wrong")
    assert ("NARAD_PASSWORD" in result.stderr) == (status == 401)


@pytest.mark.parametrize(
    ("command", "missing"),
    [
        (["topic", "ls"], "JSON"),
        (["topic", "info", "t"], "JSON"),
        (["consume", "t"], "a Narad message batch"),
        (["schema", "get", "t"], "a Narad-Schema-Version"),
    ],
)
def test_an_answer_that_is_not_the_apis_is_unavailable_not_a_traceback(
    command, missing
):
    # --url naming another server (a wrong port, a web page at that path).
    page = httpx.MockTransport(
        lambda request: httpx.Response(200, html="<html>Welcome</html>")
    )
    result = CliRunner().invoke(cli, command, obj=Session(transport=page))
    assert not isinstance(result.exception, ValueError)
    assert result.exit_code == 3
    assert result.stderr.startswith("narad: http://127.0.0.1:7942/v1/")
    assert f"answered 200 without {missing}: is it a Narad node?" in result.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["produce", "t", "x"],
        ["topic", "create", "t"],
        ["topic", "ls"],
        ["topic", "info", "t"],
        ["schema", "get", "t"],
        ["consume", "t"],
    ],
)
def test_a_redirect_is_not_taken_for_success(command):
    # A proxy that sends http:// to https://: nothing reached a node, so no
    # command may say it was done (a produce "accepted" with exit status 0).
    moved = httpx.MockTransport(
        lambda request: httpx.Response(
            301, headers={"Location": f"https://narad.example{request.url.path}"}
        )
    )
    result = CliRunner().invoke(cli, command, obj=Session(transport=moved))
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("narad: http://127.0.0.1:7942/v1/")
    assert "answered HTTP 301, a redirect to https://narad.example/v1/" in (
        result.stderr
    )


def test_a_schema_is_sent_as_written(narad, topic):
    # Key order, spacing inside and number spellings: the node stores the
    # text it gets (compacted), so the CLI sends the file's bytes.
    narad("topic", "create", topic, "--schema", '{"maximum": 1e1,  "type": "integer"}')
    _, out, _ = narad("schema", "get", topic)
    assert out == '{"maximum":1e1,"type":"integer"}\n'


def test_contexts_file_is_replaced_atomically(tmp_path):
    path = tmp_path / "c.json"
    contexts = ContextFile(path)
    contexts.save(None, {})
    assert json.loads(path.read_text()) == {"current": None, "contexts": {}}
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".contexts-")]


def test_a_schema_comes_from_a_file_a_pipe_or_inline(tmp_path):
    from narad.cli.topics import read_schema

    document = b'{"type": "object"}'
    (tmp_path / "s.json").write_bytes(document)
    assert read_schema(str(tmp_path / "s.json")) == document
    assert read_schema('{"type": "object"}') == document
    # As bash's <(...) passes it: a pipe under /dev/fd.
    reader, writer = os.pipe()
    os.write(writer, document)
    os.close(writer)
    try:
        assert read_schema(f"/dev/fd/{reader}") == document
    finally:
        os.close(reader)


def test_the_cli_offers_every_compatibility_mode_the_node_knows():
    # The CLI lists them itself so as not to import the schema engine.
    from narad.cli.topics import COMPATIBILITY
    from narad.schema.modes import Mode

    assert list(COMPATIBILITY.choices) == [mode.value for mode in Mode]
