"""Reading bodies through the WSGI input, and the strict JSON reader."""

from __future__ import annotations

import io
import json

import falcon
import falcon.testing
import pytest
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from narad import jsontext
from narad.errors import InvalidArgument
from narad.errors import PayloadTooLarge
from narad.http import error_body
from narad.http.body import MAX_BODY
from narad.http.body import read_body
from narad.quoting import quote


class Stream:
    """A WSGI input that hands out ``data`` then ends, or raises ``failure``."""

    def __init__(self, data: bytes, failure: Exception | None = None) -> None:
        self.data = io.BytesIO(data)
        self.failure = failure
        self.asked = 0
        self.handed = 0

    def read(self, size: int = -1) -> bytes:
        self.asked = max(self.asked, size)
        part = self.data.read(size)
        if not part and self.failure is not None:
            raise self.failure
        self.handed += len(part)
        return part


def request(stream: Stream, headers: dict[str, str]) -> falcon.Request:
    env = falcon.testing.create_environ(method="POST", headers=headers)
    env.pop("CONTENT_LENGTH", None)
    if "Content-Length" in headers:
        env["CONTENT_LENGTH"] = headers["Content-Length"]
    env["wsgi.input"] = stream
    return falcon.Request(env)


CHUNKED = {"Transfer-Encoding": "chunked"}


def test_chunked_body_is_read_to_its_end():
    body = b'{"id": 1}' * 10_000
    assert read_body(request(Stream(body), CHUNKED)) == body


def test_chunked_coding_is_case_and_space_insensitive():
    headers = {"Transfer-Encoding": " Chunked "}
    assert read_body(request(Stream(b"abc"), headers)) == b"abc"


def test_chunked_body_over_the_limit_is_413_without_reading_further():
    stream = Stream(b"x" * (5 * MAX_BODY))
    with pytest.raises(PayloadTooLarge, match="over 1048576 bytes"):
        read_body(request(stream, CHUNKED))
    assert stream.handed == MAX_BODY + 1
    assert stream.asked <= MAX_BODY + 1


def test_chunked_body_of_exactly_the_limit_is_accepted():
    body = b"y" * MAX_BODY
    assert read_body(request(Stream(body), CHUNKED)) == body


@pytest.mark.parametrize("coding", ["gzip, chunked", "deflate", "chunked, chunked"])
def test_other_transfer_codings_are_501(coding):
    with pytest.raises(falcon.HTTPNotImplemented):
        read_body(request(Stream(b"abc"), {"Transfer-Encoding": coding}))


def test_content_length_body_is_read_exactly():
    stream = Stream(b"0123456789rest")
    assert read_body(request(stream, {"Content-Length": "10"})) == b"0123456789"
    assert stream.handed == 10


def test_no_length_and_no_coding_is_an_empty_body():
    assert read_body(request(Stream(b"ignored"), {})) == b""


def test_short_body_is_refused_naming_both_counts():
    stream = Stream(b"0123456789")
    with pytest.raises(InvalidArgument) as caught:
        read_body(request(stream, {"Content-Length": "100"}))
    assert str(caught.value) == (
        "invalid argument: request body ended after 10 of the 100 bytes its "
        "Content-Length announced; nothing was stored"
    )


def test_content_length_over_the_limit_is_413_unread():
    stream = Stream(b"x" * 10)
    with pytest.raises(PayloadTooLarge):
        read_body(request(stream, {"Content-Length": str(MAX_BODY + 1)}))
    assert stream.handed == 0


@pytest.mark.parametrize("value", ["\u0661\u0660", "\u00b2", "+5", "5_0", "0x10", "-1"])
def test_content_length_must_be_ascii_digits(value):
    with pytest.raises(InvalidArgument, match="Content-Length must be a number"):
        read_body(request(Stream(b"abc"), {"Content-Length": value}))


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (TimeoutError("timed out"), "stopped arriving before"),
        (ConnectionResetError(), "ended before"),
        (ValueError("Invalid chunk size: b'zz'"), "is malformed: Invalid chunk size"),
    ],
)
@pytest.mark.parametrize("headers", [CHUNKED, {"Content-Length": "100"}])
def test_a_failing_input_is_the_clients_error(failure, words, headers):
    with pytest.raises(InvalidArgument, match=words) as caught:
        read_body(request(Stream(b"0123", failure), headers))
    assert "nothing was stored" in str(caught.value)


# -- the strict JSON reader ------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"a": 1, "a": 2}', "has duplicate key 'a' in the object at ''"),
        (b'{"x": [{}, {"b": {"c": 1, "c": 1}}]}', "key 'c' in the object at '/x/1/b'"),
        (b'{"a/b~": {"k": 1, "k": 2}}', "in the object at '/a~1b~0'"),
        # A later repeat of the enclosing key does not hide the inner one.
        (b'{"a": {"x": 1, "x": 2}, "a": 3}', "key 'x' in the object at '/a'"),
        (b'{"\\ud800": 1, "\\ud800": 2}', "duplicate key '\\ud800'"),
        ("[1]".encode("utf-16"), "is UTF-16; JSON must be UTF-8"),
        ('{"a": 1}'.encode("utf-16-le"), "is UTF-16; JSON must be UTF-8"),
        ('{"a": 1}'.encode("utf-16-be"), "is UTF-16; JSON must be UTF-8"),
        ("{}".encode("utf-32"), "is UTF-32; JSON must be UTF-8"),
        ("{}".encode("utf-32-le"), "is UTF-32; JSON must be UTF-8"),
        (b"\xef\xbb\xbf{}", "starts with a UTF-8 byte-order mark"),
        (b'{"a": NaN}', "has NaN, which is not JSON"),
        (b"[-Infinity]", "has -Infinity, which is not JSON"),
        (b"{} {}", "has trailing data"),
        (b'"\xff"', "not valid UTF-8 at byte 1"),
        (b"", "empty"),
    ],
)
def test_strict_reader_refusals(data, words):
    with pytest.raises(jsontext.JSONTextError) as caught:
        jsontext.loads(data, max_depth=16)
    assert words in str(caught.value)


def test_a_long_repeated_key_is_quoted_short():
    key = "k" * 5000
    data = b'{"%s": 1, "%s": 2}' % (key.encode(), key.encode())
    with pytest.raises(jsontext.DuplicateKey) as caught:
        jsontext.loads(data, max_depth=4)
    assert caught.value.key == key
    assert len(str(caught.value)) < 200
    assert "…" in str(caught.value)


def test_repeats_are_allowed_only_when_asked():
    assert jsontext.loads(
        b'{"a": 1, "a": 2}', max_depth=4, allow_duplicate_keys=True
    ) == {"a": 2}


def test_lone_surrogates_are_kept_as_data():
    assert jsontext.loads(b'{"\\udc00": "\\ud800"}', max_depth=4) == {
        "\udc00": "\ud800"
    }


# -- error text ------------------------------------------------------------------------


def test_quote_cuts_after_100_characters():
    assert quote("id") == "'id'"
    assert quote("a" * 100) == repr("a" * 100)
    assert quote("a" * 101) == repr("a" * 100) + "…"
    assert quote("\ud800\n") == "'\\ud800\\n'"


def test_error_body_is_utf8_json_even_with_a_lone_surrogate():
    body = error_body("bad \ud800 é")
    assert json.loads(body.decode("utf-8")) == {"error": "bad \ud800 é"}
    assert error_body("é").decode("utf-8") == '{"error":"é"}\n'


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_brackety = st.text(st.sampled_from('[]{}"\\ax'), max_size=6)
_nested = st.recursive(
    st.one_of(st.none(), st.integers(), _brackety),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_brackety, inner, max_size=3)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_nested, st.integers(0, 6), st.booleans())
def test_nesting_depth_ignores_brackets_and_escapes_in_strings(value, limit, spaced):
    data = json.dumps(value, indent=1 if spaced else None).encode()
    assert jsontext.nesting_depth_exceeds(data, limit) == (_depth(value) > limit)


@settings(max_examples=300, deadline=None)
@given(_nested, st.integers(0, 6))
def test_loads_refuses_exactly_the_values_nested_too_deep(value, limit):
    data = json.dumps(value).encode()
    if _depth(value) > limit:
        with pytest.raises(jsontext.TooDeep):
            jsontext.loads(data, max_depth=limit, allow_duplicate_keys=True)
    else:
        assert jsontext.loads(data, max_depth=limit, allow_duplicate_keys=True) == value


@pytest.mark.parametrize(
    "data",
    [
        b"[" * 300 + b"]" * 300,  # measured after parsing
        b"[" * 300,  # not JSON either: too deep is what is said
        b"[" * 300 + b'{"a": 1, "a": 2}' + b"]" * 300,
        b"[" * 20_000 + b"]" * 20_000,  # measured before parsing
        b"[" * 20_000,
    ],
)
def test_too_deep_is_said_first(data):
    with pytest.raises(jsontext.TooDeep):
        jsontext.loads(data, max_depth=256)


def test_brackets_inside_strings_do_not_count():
    data = json.dumps(["[{" * 3000] * 3).encode()
    assert jsontext.loads(data, max_depth=2) == ["[{" * 3000] * 3


@pytest.mark.parametrize("end", [b"]", b"", b",,"], ids=["valid", "short", "bad"])
def test_depth_of_a_text_mostly_strings_is_measured_on_the_value(end):
    # Few brackets for many bytes: the parsed value is walked, or on a text
    # that does not parse, the text is measured after all.
    data = b'[["' + b"[" * 10 + b"x" * 5000 + b'"]' + end
    with pytest.raises(jsontext.TooDeep):
        jsontext.loads(data, max_depth=1)
    if end == b"]":
        assert jsontext.loads(data, max_depth=2) == [["[" * 10 + "x" * 5000]]
