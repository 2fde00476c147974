"""Registry subjects: which history a subject name is, and the versions of
either kind as the registry shows them.

The subject ``<topic>-value`` of a topic that exists *is* the topic's schema
history (Confluent's TopicNameStrategy names a topic's value schema so):
registering under it is a schema change of the topic. Any other subject
(``<topic>-key``, a record name, ``<t>-value`` of no topic) is standalone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VALUE_SUFFIX = "-value"
# A topic's name (narad.http.topics.NAME): the part before "-value" must be
# one for the subject to be a topic's.
_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: The longest subject name the registry takes: a subject is a topic name
#: (249) plus a suffix, or a record's full name; this keeps keys, messages
#: and request lines small.
MAX_SUBJECT = 255
#: What a subject name may hold: printable ASCII, as Kafka topic names,
#: Avro/Protobuf full names and .proto import paths (Confluent's Protobuf
#: serializer names an imported file's subject by its path) are. A "/"
#: arrives percent-encoded in a route's subject (narad.http.registry).
SUBJECT = re.compile(rf"[ -~]{{1,{MAX_SUBJECT}}}")
#: Version numbers are Confluent's: 1 up to 2^31 - 1.
MAX_VERSION = 2**31 - 1


def topic_of(subject: str) -> str:
    """The topic whose history ``subject`` would be (``orders`` for
    ``orders-value``), or ``""`` when it can be no topic's."""
    if not subject.endswith(VALUE_SUFFIX):
        return ""
    topic = subject[: -len(VALUE_SUFFIX)]
    if _TOPIC_NAME.fullmatch(topic) is None or topic.strip(".") == "":
        return ""
    return topic


def subject_of(topic: str) -> str:
    """The subject of ``topic``'s history."""
    return topic + VALUE_SUFFIX


def candidate_topics(prefix: str) -> set[str]:
    """The topics shorter than ``prefix`` whose subject may start with it:
    ``orders`` for ``orders-va`` (``orders-value`` starts with it)."""
    found = set()
    for cut in range(1, len(VALUE_SUFFIX) + 1):
        if prefix.endswith(VALUE_SUFFIX[:cut]):
            topic = prefix[:-cut]
            if topic and _TOPIC_NAME.fullmatch(topic):
                found.add(topic)
    return found


@dataclass(frozen=True)
class Version:
    """One version of a subject, as the registry shows it.

    Attributes:
        subject: The subject.
        version: Its number in the subject.
        schema_id: Its global schema id.
        schema_type: Its type's name.
        document: The stored document (what the type's ``registry_schema``
            turns into Confluent's ``schema`` string).
        references: Compact JSON array of references, or empty.
        deleted: Soft-deleted (standalone subjects only).
    """

    subject: str
    version: int
    schema_id: int
    schema_type: str
    document: bytes
    references: bytes = b""
    deleted: bool = False


def parse_version(text: str) -> int | None:
    """A version as a path names it: a number from 1, or ``None`` for
    ``latest`` (and ``-1``, Confluent's other name for it).

    Raises:
        ValueError: neither.
    """
    if text in ("latest", "-1"):
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 10:
        raise ValueError(text)
    number = int(text)
    if not 1 <= number <= MAX_VERSION:
        raise ValueError(text)
    return number
