"""Kafka's generated messages as the KRaft metadata log and the tiered storage's metadata topic
store them (``AbstractApiMessageSerde``): the frame, and readers of the flexible encoding.

A record value is framed as::

    uvarint frameVersion (= 1; 0 was the 2.8 KRaft preview's, which no release reads)
    uvarint apiKey       (the message type, at most 32767: a Java short)
    uvarint version      (the message version, at most 32767)
    message              (flexible encoding, nothing may follow it)

Flexible encoding: int8/int16/int32/int64 big-endian, uuid 16 bytes (rendered as Kafka's
``Uuid.toString``, as ``partition.metadata`` writes it: URL-safe base64 without padding, 22
characters), compact string uvarint(length + 1) + UTF-8, compact array uvarint(count + 1) +
elements (0 = null); a message, and every struct inside it, ends with a tagged-field section:
uvarint count, per field uvarint tag, uvarint size, payload. Tags a version does not define are
skipped.

Kafka sources: ``AbstractApiMessageSerde.java``, ``ByteUtils.java``, ``Uuid.java``
(``toString``), the generated messages' ``read`` methods.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Final

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import IssueKind
from txn_audit.formats.primitives import Reader

__all__ = ["FRAME_VERSION", "MAX_FRAME_FIELD", "UUID_SIZE", "expect_end", "read_frame", "read_uuid", "skip_tags",
           "tagged_fields", "uuid_string"]

FRAME_VERSION: Final = 1
MAX_FRAME_FIELD: Final = 0x7FFF  # apiKey and version are Java shorts
UUID_SIZE: Final = 16

_CORRUPT: Final = IssueKind.CORRUPT_RECORD.value
_UNKNOWN_VERSION: Final = IssueKind.UNKNOWN_VERSION.value


def uuid_string(raw: bytes) -> str:
    """A 16-byte UUID as Kafka prints it: URL-safe base64 without padding (``partition.metadata``)."""
    if len(raw) != UUID_SIZE:
        raise ValueError(f"a UUID has 16 bytes, not {len(raw)}")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _frame_field(r: Reader, what: str) -> int:
    start = r.pos
    value = r.uvarint()
    if value > MAX_FRAME_FIELD:
        raise CorruptInputError(_CORRUPT, start, f"{what} {value} does not fit a Java short")
    return value


def read_frame(r: Reader) -> tuple[int, int]:
    """The frame of a record value: its (apiKey, version), the reader left at the message.
    Raises ``CorruptInputError``: ``unknown_version`` for a frame version other than 1,
    ``corrupt_record`` for a field beyond a Java short or a truncated frame."""
    frame = _frame_field(r, "frame version")
    if frame != FRAME_VERSION:
        raise CorruptInputError(_UNKNOWN_VERSION, 0, f"frame version {frame}, only {FRAME_VERSION} is known")
    return _frame_field(r, "apiKey"), _frame_field(r, "version")


def read_uuid(r: Reader) -> str:
    return uuid_string(r.raw(UUID_SIZE, "uuid"))


def tagged_fields(r: Reader, what: str) -> Iterator[tuple[int, Reader]]:
    """Each tagged field as (tag, a reader over exactly its payload)."""
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        size = r.uvarint()
        start = r.pos
        payload = r.raw(size, f"{what} tagged field {tag}")
        yield tag, Reader(payload, base=r.base + start, kind=r.kind)


def skip_tags(r: Reader, what: str) -> None:
    """A tagged-field section where no tag is defined: every field skipped."""
    for _tag, _payload in tagged_fields(r, what):
        pass


def expect_end(r: Reader, what: str) -> None:
    """Nothing may follow ``what``."""
    if r.remaining:
        raise CorruptInputError(_CORRUPT, r.base + r.pos, f"{r.remaining} bytes left after {what}")
