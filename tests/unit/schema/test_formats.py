from __future__ import annotations

import jsonschema
import pytest

from narad.plugins import Plugins
from narad.plugins import get_plugin_manager
from narad_formats import CHECKERS

GOOD_AND_BAD = {
    "email": (
        ["a@b.com", "joe.bloggs@example.com", '"a b"@x.org', "a@[127.0.0.1]"],
        ["a", "@b.com", "a@", "a..b@x.com", ".a@x.com", "a@-x.com", "a b@x.com"],
    ),
    "idn-email": (["실례@실례.테스트", "a@b.com"], ["2962", "a@"]),
    "date-time": (
        [
            "1963-06-19T08:30:06.283185Z",
            "1998-12-31T23:59:60Z",
            "1998-12-31T15:59:60.123-08:00",
            "2020-02-29t00:00:00z",
        ],
        [
            "1998-12-31T23:58:60Z",
            "2019-02-29T00:00:00Z",
            "1963-06-19 08:30:06Z",
            "1963-06-19T08:30:06",
            "1963-06-19T08:30:06.Z",
            "1963-06-1\uff19T08:30:06Z",
        ],
    ),
    "date": (
        ["2020-02-29", "1963-06-19"],
        ["2021-02-29", "2020-13-01", "06/19/1963", "2020-1-01"],
    ),
    "time": (
        ["08:30:06Z", "08:30:06.283185+01:00", "23:59:60Z"],
        ["08:30:06", "8:30:06Z", "22:59:60Z", "08:30:06+24:00"],
    ),
    "duration": (
        ["P4DT12H30M5S", "P1W", "PT1S", "P1Y2M"],
        ["P", "PT", "P1W2D", "P1D2H", "1D", "PT1D", "P1YT"],
    ),
    "uuid": (
        ["2EB8AA08-AA98-11EA-B4AA-73B441D16380"],
        ["2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08aa9811eab4aa73b441d16380"],
    ),
    "ipv4": (
        ["192.168.0.1", "0.0.0.0"],
        ["256.1.1.1", "1.2.3", "087.10.0.1", "1.2.3.4.5", "1.2.3.\uff14"],
    ),
    "ipv6": (
        ["::1", "::ffff:1.2.3.4", "2001:db8::8a2e:370:7334"],
        ["12345::", "::1%eth0", "1:2:3:4:5:6:7:8:9", ":::1"],
    ),
    "hostname": (
        ["www.example.com", "a", "xn--4gbwdl.xn--wgbh1c"],
        ["-a.com", "a-.com", "a" * 64 + ".com", "ab--cd.com", "a..b", ""],
    ),
    "idn-hostname": (["실례.테스트", "example.com"], ["〮실례.테스트", "-a.com", ""]),
    "uri": (
        [
            "http://foo.bar/?baz=qux#quux",
            "urn:isbn:0451450523",
            "mailto:a@b.c",
            "http://[2001:db8::1]:80/",
        ],
        [
            "//foo.bar",
            "http:// shouldfail.com",
            "\\\\WINDOWS\\fileshare",
            "abc",
            "http://[zz]/",
            "http://a/b c",
        ],
    ),
    "uri-reference": (
        ["/abc", "#f", "i?q", "http://x.y/z"],
        ["\\\\WINDOWS", "#frag#ment", "a b"],
    ),
    "iri": (["http://ƒøø.ßår/?∂éœ=πîx#πîüx"], ["/abc", "http://a b"]),
    "iri-reference": (
        ["//ƒøø.ßår/?∂éœ=πîx#πîüx", "#ƒrägmênt"],
        ["\\\\WINDOWS", "#ƒräg\\mênt"],
    ),
    "json-pointer": (["", "/foo/bar~0/baz~1/%a", "/"], ["/foo/bar~", "#", "a/b"]),
    "relative-json-pointer": (
        ["1", "0#", "0/foo/bar", "120/foo"],
        ["/foo", "-1/foo", "01/a", "0##", ""],
    ),
    "regex": (["^[a-z]+$", "([abc])+\\s+"], ["^(abc]", "(?=x)", "(a)\\1"]),
    "uri-template": (
        ["http://example.com/dictionary/{term:1}/{term}", "{+path}/here", "{x,y}"],
        ["http://example.com/dictionary/{term:1}/{term", "{}", "{a b}"],
    ),
}
CASES = [
    (name, value, ok)
    for name, (good, bad) in GOOD_AND_BAD.items()
    for value, ok in [(v, True) for v in good] + [(v, False) for v in bad]
]


def test_hook_narad_format_checkers_covers_every_format():
    checkers = Plugins(get_plugin_manager(load_entry_points=False)).format_checkers()
    assert set(GOOD_AND_BAD) <= set(checkers)


@pytest.mark.parametrize(("name", "value", "ok"), CASES)
def test_checker(name, value, ok):
    assert CHECKERS[name](value) is ok


def test_python_jsonschema_passes_values_ours_refuse():
    # Why the plugin exists: without optional packages these pass silently.
    reference = jsonschema.FormatChecker()
    silently_passed = [
        (name, value)
        for name, value, ok in CASES
        if not ok and reference.conforms(value, name)
    ]
    assert silently_passed
    assert not [(n, v) for n, v in silently_passed if CHECKERS[n](v)]


HOSTILE = [
    "a" * (1 << 20),
    "1" * (1 << 20),
    "P" + "1" * (1 << 20),
    "/" + "~" * (1 << 20),
    "{" + "a," * (1 << 19),
    "http://x/" + "%" * (1 << 20),
    "a@" + "b." * (1 << 19),
    "1998-12-31T23:59:60." + "1" * (1 << 20),
]


@pytest.mark.parametrize("name", sorted(CHECKERS))
def test_1_mib_hostile_strings_get_a_verdict(name):
    # How long they take is bench/validate.py's "format checkers" row.
    for value in HOSTILE:
        assert CHECKERS[name](value) in (True, False)
