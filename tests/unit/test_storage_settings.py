"""storage.max_memory and storage.durability."""

from __future__ import annotations

import pytest

from narad.config import Config
from narad.config import physical_memory
from narad.errors import InvalidConfiguration
from narad.serve.embedded import MIN_DEFAULT_MEMORY
from narad.serve.embedded import default_max_memory


@pytest.mark.parametrize(
    ("raw", "size"),
    [
        (0, 0),
        ("0", 0),
        (3 << 20, 3 << 20),
        ("1048576", 1 << 20),
        ("512mb", 512 << 20),
        ("512 MiB", 512 << 20),
        ("2GB", 2 << 30),
        ("1t", 1 << 40),
    ],
)
def test_max_memory_sizes(raw, size):
    config = Config.load(env={"NARAD_STORAGE_MAX_MEMORY": str(raw)})
    assert config.get("storage.max_memory") == size


def test_max_memory_as_a_share_of_the_machine():
    config = Config.load(env={}, overrides={"storage.max_memory": "50%"})
    assert config.get("storage.max_memory") == physical_memory() // 2


@pytest.mark.parametrize(
    "raw",
    # Sizes Valkey cannot take (over 2**64 bytes) made it exit saying nothing.
    ["lots", "-5", "1kb", "0%", "101%", "", "1.5gb", "20000000tb", str(1 << 64)],
)
def test_bad_max_memory_names_the_setting(raw):
    with pytest.raises(InvalidConfiguration, match=r"`storage\.max_memory`"):
        Config.load(env={"NARAD_STORAGE_MAX_MEMORY": raw})


def test_the_default_is_a_quarter_of_the_machine():
    assert default_max_memory() == max(physical_memory() // 4, MIN_DEFAULT_MEMORY)


def test_durability_is_strict_or_relaxed():
    assert Config.load(env={}).get("storage.durability") == "strict"
    relaxed = Config.load(env={"NARAD_STORAGE_DURABILITY": "relaxed"})
    assert relaxed.get("storage.durability") == "relaxed"
    with pytest.raises(InvalidConfiguration, match="expected one of strict, relaxed"):
        Config.load(env={"NARAD_STORAGE_DURABILITY": "loose"})
