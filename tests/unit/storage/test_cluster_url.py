"""``redis+cluster://`` storage URLs and ``storage.min_replicas``."""

from __future__ import annotations

import pytest

from narad.cli.node import print_config
from narad.config import Config
from narad.errors import InvalidConfiguration
from narad.plugins import load_plugins
from narad_redis.client import _Tcp
from narad_redis.client import _Tls
from narad_redis.cluster import is_cluster_url
from narad_redis.cluster import parse_cluster_url


def test_seeds_and_shared_options():
    seeds, options, kind = parse_cluster_url(
        "redis+cluster://narad:s3cret@10.0.0.1:7000,10.0.0.2:7001, 10.0.0.3:7002"
    )
    assert seeds == [("10.0.0.1", 7000), ("10.0.0.2", 7001), ("10.0.0.3", 7002)]
    assert options["username"] == "narad"
    assert options["password"] == "s3cret"
    assert kind is _Tcp


def test_tls_scheme_uses_tls_connections():
    seeds, _, kind = parse_cluster_url("rediss+cluster://h1:7000")
    assert seeds == [("h1", 7000)]
    assert kind is _Tls


def test_database_zero_is_accepted():
    seeds, options, _ = parse_cluster_url("redis+cluster://h1:7000/0")
    assert seeds == [("h1", 7000)]
    assert "db" not in options


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+cluster://h1:7000/3", "only database 0"),
        ("redis+cluster://h1:7000,,h2:7000", "empty node"),
        ("redis://h1:7000", "no cluster URL"),
    ],
)
def test_malformed_urls_are_refused(url, says):
    with pytest.raises(InvalidConfiguration, match=says):
        parse_cluster_url(url)


def test_only_cluster_schemes_are_cluster_urls():
    assert is_cluster_url("redis+cluster://h:1")
    assert is_cluster_url("rediss+cluster://h:1")
    assert not is_cluster_url("redis://h:1,h:2/0")
    assert not is_cluster_url("unix:///tmp/s.sock")


def test_the_redis_plugin_claims_the_cluster_schemes():
    backends = load_plugins(Config.load(env={})).storage_backends()
    assert {"redis+cluster", "rediss+cluster"} <= set(backends)


def test_min_replicas_defaults_to_the_primary_alone():
    assert Config.load(env={}).get("storage.min_replicas") == 0
    config = Config.load(env={"NARAD_STORAGE_MIN_REPLICAS": "1"})
    assert config.get("storage.min_replicas") == 1


@pytest.mark.parametrize("raw", ["-1", "17", "one"])
def test_min_replicas_out_of_range_is_refused(raw):
    with pytest.raises(InvalidConfiguration, match="min_replicas"):
        Config.load(env={"NARAD_STORAGE_MIN_REPLICAS": raw})


def test_narad_config_shows_a_cluster_url_without_its_password(capsys):
    config = Config.load(
        env={
            "NARAD_STORAGE_URL": "redis+cluster://narad:s3cret@10.0.0.1:7000,10.0.0.2:7000",
            "NARAD_STORAGE_MIN_REPLICAS": "1",
        }
    )
    print_config(config)
    out = capsys.readouterr().out
    assert 'url = "redis+cluster://narad:***@10.0.0.1:7000,10.0.0.2:7000"' in out
    assert "s3cret" not in out
    assert "min_replicas = 1" in out
