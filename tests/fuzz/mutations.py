"""Mutation operators shared by the hypothesis suite and the long runner (``tests.fuzz.run``).

An operator turns intact bytes into damaged bytes. Every random choice goes through a
``Pick`` (``pick(lo, hi)`` -> an int in ``[lo, hi]``), so hypothesis (``st.data().draw``) and
a plain ``random.Random`` (``randint``) drive the same code. Structure-aware operators
(lying lengths, bad magic, records-count mismatch) need to know where a format keeps those
fields: a ``Fields`` per seed says so, and an operator with nothing to aim at falls back to a
random spot.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field

Pick = Callable[[int, int], int]

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Fields:
    """Where a seed keeps the fields worth lying about: ``(position, struct format)`` pairs."""

    lengths: tuple[tuple[int, str], ...] = ()
    magics: tuple[tuple[int, str], ...] = ()
    counts: tuple[tuple[int, str], ...] = ()
    boundaries: tuple[int, ...] = field(default=())  # entry starts: truncation points worth hitting


def _spot(data: bytes, pick: Pick) -> int:
    return pick(0, len(data) - 1)


def bit_flip(data: bytes, pick: Pick, fields: Fields) -> bytes:
    if not data:
        return b"\x01"
    out = bytearray(data)
    out[_spot(data, pick)] ^= 1 << pick(0, 7)
    return bytes(out)


def byte_set(data: bytes, pick: Pick, fields: Fields) -> bytes:
    if not data:
        return bytes([pick(0, 255)])
    out = bytearray(data)
    i = _spot(data, pick)
    value = pick(0, 254)
    out[i] = value if value < out[i] else value + 1  # always a change
    return bytes(out)


def truncate(data: bytes, pick: Pick, fields: Fields) -> bytes:
    if not data:
        return data
    ends = [b for b in fields.boundaries if 0 < b < len(data)]
    if ends and pick(0, 3) == 0:  # a cut right at or next to an entry boundary
        return data[: max(0, ends[pick(0, len(ends) - 1)] + pick(-2, 2))]
    return data[: pick(0, len(data) - 1)]


def insert(data: bytes, pick: Pick, fields: Fields) -> bytes:
    at = pick(0, len(data))
    chunk = bytes(pick(0, 255) for _ in range(pick(1, 16)))
    return data[:at] + chunk + data[at:]


def delete(data: bytes, pick: Pick, fields: Fields) -> bytes:
    if not data:
        return data
    at = _spot(data, pick)
    return data[:at] + data[at + pick(1, min(16, len(data) - at)) :]


def _lie(data: bytes, pick: Pick, spots: tuple[tuple[int, str], ...], values: Callable[[int, str], int]) -> bytes:
    usable = [(p, f) for p, f in spots if p + struct.calcsize(f) <= len(data)]
    if not usable:
        return byte_set(data, pick, Fields())
    pos, fmt = usable[pick(0, len(usable) - 1)]
    out = bytearray(data)
    value = values(pos, fmt)
    bits = struct.calcsize(fmt) * 8 - 1
    value = max(-(2**bits), min(2**bits - 1, value))
    struct.pack_into(fmt, out, pos, value)
    return bytes(out)


def lying_length(data: bytes, pick: Pick, fields: Fields) -> bytes:
    """A length field set to -1, a large negative, 0, a small lie, the int max or past EOF."""

    def value(pos: int, fmt: str) -> int:
        top = 2 ** (struct.calcsize(fmt) * 8 - 1) - 1
        choices = [-1, -top - 1, 0, pick(1, 64), top, len(data) - pos + pick(1, 4096), INT32_MAX]
        return choices[pick(0, len(choices) - 1)]

    return _lie(data, pick, fields.lengths, value)


def bad_magic(data: bytes, pick: Pick, fields: Fields) -> bytes:
    """A magic / version field set to a neighbour, a negative or an unknown version."""

    def value(pos: int, fmt: str) -> int:
        (old,) = struct.unpack_from(fmt, data, pos)
        choices = [old + 1, old - 1, -1, 3, 127, pick(-128, 127)]
        new = choices[pick(0, len(choices) - 1)]
        return new if new != old else old + 1

    return _lie(data, pick, fields.magics, value)


def count_mismatch(data: bytes, pick: Pick, fields: Fields) -> bytes:
    """A records / entries count that disagrees with the payload (one more, one less, wild)."""

    def value(pos: int, fmt: str) -> int:
        (old,) = struct.unpack_from(fmt, data, pos)
        choices = [old + 1, old - 1, 0, -1, old * 2 + 1, INT32_MAX, pick(-(2**31), INT32_MAX)]
        new = choices[pick(0, len(choices) - 1)]
        return new if new != old else old + 1

    return _lie(data, pick, fields.counts, value)


def zero_tail(data: bytes, pick: Pick, fields: Fields) -> bytes:
    """Zeros after the data (a preallocated segment) or over its end (a crash mid-write)."""
    zeros = bytes(pick(1, 4096))
    if data and pick(0, 1):
        return data[: pick(0, len(data) - 1)] + zeros
    return data + zeros


def garbage(data: bytes, pick: Pick, fields: Fields) -> bytes:
    """Random bytes over a stretch of the file, appended, or as the whole file."""
    chunk = bytes(pick(0, 255) for _ in range(pick(1, 64)))
    where = pick(0, 2)
    if where == 0 or not data:
        return chunk
    if where == 1:
        return data + chunk
    at = _spot(data, pick)
    return data[:at] + chunk + data[at + len(chunk) :]


def empty(data: bytes, pick: Pick, fields: Fields) -> bytes:
    return b""


OPERATORS: dict[str, Callable[[bytes, Pick, Fields], bytes]] = {
    "bit_flip": bit_flip,
    "byte_set": byte_set,
    "truncate": truncate,
    "insert": insert,
    "delete": delete,
    "lying_length": lying_length,
    "bad_magic": bad_magic,
    "count_mismatch": count_mismatch,
    "zero_tail": zero_tail,
    "garbage": garbage,
    "empty": empty,
}


def first_difference(a: bytes, b: bytes) -> int:
    """Index of the first byte where ``a`` and ``b`` differ (the shorter length if one is a prefix)."""
    n = min(len(a), len(b))
    lo = 0
    while lo < n:  # compare in blocks: the seeds are small but the runner calls this a lot
        hi = min(n, lo + 4096)
        if a[lo:hi] != b[lo:hi]:
            return next(i for i in range(lo, hi) if a[i] != b[i])
        lo = hi
    return n
