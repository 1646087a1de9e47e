"""Bounds-checked reading and writing of Kafka's wire primitives.

Fixed-width integers are big-endian two's complement. ``varint``/``varlong`` are zig-zag
encoded (record fields); ``uvarint`` is plain unsigned LEB128 (flexible-version message
fields: compact strings and arrays, tagged fields). A varint is at most 5 bytes, a varlong
10; as in Java, a varint keeps the low 32 bits of what its 5 bytes hold.

``read_uvarint``/``read_varint``/``read_varlong`` are the one varint reader: the record decoder
(``record_batch``, the hot path) calls them directly, ``Reader`` through its cursor. Every read
past the end raises ``CorruptInputError`` (``VarintError`` from the bare readers) carrying the
position, never ``struct.error``/``IndexError``.
"""

from __future__ import annotations

import struct
from typing import Final

from txn_audit.errors import CorruptInputError

INT32_MIN: Final = -(1 << 31)
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_U32: Final = struct.Struct(">I")
_I64: Final = struct.Struct(">q")

Buffer = bytes | bytearray | memoryview

VARINT_MAX_BYTES: Final = 5
VARLONG_MAX_BYTES: Final = 10


class VarintError(Exception):
    """A varint starting at ``start`` runs past the end (at ``at``) or is longer than allowed."""

    def __init__(self, start: int, at: int, max_bytes: int, *, past_end: bool) -> None:
        super().__init__(f"varint at {start} {'runs past the end' if past_end else f'longer than {max_bytes} bytes'}")
        self.start = start
        self.at = at
        self.max_bytes = max_bytes
        self.past_end = past_end


def read_uvarint(data: Buffer, pos: int, stop: int, max_bytes: int) -> tuple[int, int]:
    """Unsigned LEB128 at ``pos``, ending before ``stop``: (value, position after it)."""
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= stop:
            raise VarintError(start, pos, max_bytes, past_end=True)
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise VarintError(start, pos, max_bytes, past_end=False)


def read_varint(data: Buffer, pos: int, stop: int) -> tuple[int, int]:
    """Zig-zag varint (a Java ``int``) at ``pos``: (value, position after it)."""
    if pos < stop:
        b = data[pos]
        if b < 0x80:  # one byte: most record fields
            return (b >> 1) ^ -(b & 1), pos + 1
    u, pos = read_uvarint(data, pos, stop, VARINT_MAX_BYTES)
    u &= 0xFFFFFFFF  # Java keeps the low 32 bits of a 5-byte varint
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(data: Buffer, pos: int, stop: int) -> tuple[int, int]:
    """Zig-zag varlong (a Java ``long``) at ``pos``: (value, position after it)."""
    u, pos = read_uvarint(data, pos, stop, VARLONG_MAX_BYTES)
    u &= 0xFFFFFFFFFFFFFFFF
    return (u >> 1) ^ -(u & 1), pos


class Reader:
    """A cursor over a buffer. ``base`` is added to positions reported in errors."""

    __slots__ = ("buf", "pos", "end", "base", "kind")

    def __init__(
        self,
        buf: Buffer,
        pos: int = 0,
        end: int | None = None,
        *,
        base: int = 0,
        kind: str = "bad_length",
    ) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.base = base
        self.kind = kind

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        start = self.pos
        if n < 0 or start + n > self.end:
            raise CorruptInputError(
                self.kind,
                self.base + start,
                f"{what} needs {n} bytes, {self.end - start} left",
            )
        self.pos = start + n
        return start

    def _fixed(self, form: struct.Struct, what: str) -> int:
        value: int = form.unpack_from(self.buf, self._need(form.size, what))[0]
        return value

    def int8(self) -> int:
        return self._fixed(_I8, "int8")

    def int16(self) -> int:
        return self._fixed(_I16, "int16")

    def int32(self) -> int:
        return self._fixed(_I32, "int32")

    def uint32(self) -> int:
        return self._fixed(_U32, "uint32")

    def int64(self) -> int:
        return self._fixed(_I64, "int64")

    def raw(self, n: int, what: str = "bytes") -> bytes:
        start = self._need(n, what)
        return bytes(self.buf[start : start + n])

    def uvarint(self, max_bytes: int = VARINT_MAX_BYTES) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, self.end, max_bytes)
        except VarintError as err:
            raise self._varint_error(err) from None
        return value

    def varint(self) -> int:
        try:
            value, self.pos = read_varint(self.buf, self.pos, self.end)
        except VarintError as err:
            raise self._varint_error(err) from None
        return value

    def varlong(self) -> int:
        try:
            value, self.pos = read_varlong(self.buf, self.pos, self.end)
        except VarintError as err:
            raise self._varint_error(err) from None
        return value

    def _varint_error(self, err: VarintError) -> CorruptInputError:
        if err.past_end:
            return CorruptInputError(self.kind, self.base + err.at, "varint runs past the end")
        return CorruptInputError(self.kind, self.base + err.start, f"varint longer than {err.max_bytes} bytes")

    # -- strings and byte arrays -------------------------------------------------------

    def string16(self, *, nullable: bool = False) -> str | None:
        """Non-flexible string: int16 length (-1 = null) then UTF-8."""
        n = self.int16()
        if n < 0:
            if nullable and n == -1:
                return None
            raise CorruptInputError(self.kind, self.base + self.pos - 2, f"string length {n}")
        return self._utf8(n)

    def compact_string(self, *, nullable: bool = False) -> str | None:
        """Flexible string: uvarint(length + 1), 0 = null."""
        n = self.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise CorruptInputError(self.kind, self.base + self.pos - 1, "null compact string")
        return self._utf8(n)

    def _utf8(self, n: int) -> str:
        start = self._need(n, "string")
        try:
            return bytes(self.buf[start : start + n]).decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorruptInputError(self.kind, self.base + start, f"invalid UTF-8: {err.reason}") from err

    def varint_bytes(self) -> bytes | None:
        """Record field: zig-zag varint length (-1 = null) then the bytes."""
        n = self.varint()
        if n < 0:
            if n == -1:
                return None
            raise CorruptInputError(self.kind, self.base + self.pos - 1, f"byte length {n}")
        return self.raw(n)

    def skip_tagged_fields(self) -> tuple[int, ...]:
        """Skip a tagged-field section, returning the tags seen."""
        tags = []
        for _ in range(self.uvarint()):
            tags.append(self.uvarint())
            self._need(self.uvarint(), "tagged field")
        return tuple(tags)


# -- writing ---------------------------------------------------------------------------


def write_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError("uvarint must be non-negative")
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def write_varint(value: int) -> bytes:
    """Zig-zag encode a signed 32-bit value."""
    return write_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(value: int) -> bytes:
    """Zig-zag encode a signed 64-bit value."""
    return write_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_varint_bytes(data: bytes | None) -> bytes:
    if data is None:
        return write_varint(-1)
    return write_varint(len(data)) + data


def write_string16(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def write_compact_string(value: str | None) -> bytes:
    if value is None:
        return write_uvarint(0)
    raw = value.encode("utf-8")
    return write_uvarint(len(raw) + 1) + raw


def pack_i8(v: int) -> bytes:
    return _I8.pack(v)


def pack_i16(v: int) -> bytes:
    return _I16.pack(v)


def pack_i32(v: int) -> bytes:
    return _I32.pack(v)


def pack_u32(v: int) -> bytes:
    return _U32.pack(v)


def pack_i64(v: int) -> bytes:
    return _I64.pack(v)
