"""Damage every byte of small segments: truncation, single bit flips, huge sizes, zero tails.

Real segments (``hanging-unadded-partition`` hang-0 / hang-1) when the corpus is present, plus a
synthetic one with every codec, a marker and legacy entries so the test also runs without it.
"""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from tests.fuzz.targets import synthetic_segment
from tests.realcorpus import SCENARIOS, scenario_dir
from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import BatchHeader, DecodeIssue
from txn_audit.formats.segment import iter_batches, iter_records


Item = BatchHeader | DecodeIssue


def _sources() -> list[tuple[str, bytes]]:
    out = [("synthetic", synthetic_segment())]
    name = "hanging-unadded-partition"
    if name in SCENARIOS:
        for part in ("hang-0", "hang-1"):
            path = scenario_dir(name) / "logdirs" / part / "00000000000000000000.log"
            out.append((f"{name}:{part}", path.read_bytes()))
    return out


SOURCES = _sources()


def _walk(data: bytes) -> list[Item]:
    """iter_batches plus iter_records on every header: only CorruptInputError may come out."""
    items = list(iter_batches(data))
    for item in items:
        if isinstance(item, BatchHeader):
            try:
                iter_records(data, item)
            except CorruptInputError:
                pass
    return items


def _reference(data: bytes) -> list[BatchHeader]:
    items = list(iter_batches(data))
    assert all(isinstance(i, BatchHeader) for i in items), items
    return items  # type: ignore[return-value]


def _before(items: list[Item], position: int) -> list[Item]:
    return [i for i in items if i.position < position]


@pytest.mark.parametrize(("name", "data"), SOURCES, ids=[n for n, _ in SOURCES])
def test_truncation_at_every_byte(name: str, data: bytes) -> None:
    ref = _reference(data)
    assert len(ref) >= 2
    ends = {h.position + h.size_bytes for h in ref}
    for cut in range(len(data)):
        items = _walk(data[:cut])
        whole = [h for h in ref if h.position + h.size_bytes <= cut]
        headers = [i for i in items if isinstance(i, BatchHeader)]
        issues = [i for i in items if isinstance(i, DecodeIssue)]
        assert headers == whole, cut
        if cut in ends or cut == 0:
            assert issues == [], cut
            continue
        at = max((h.position + h.size_bytes for h in whole), default=0)
        tail = data[at:cut]
        expected = ("zero_filled_tail", "info") if not tail.strip(b"\x00") else ("truncated_tail", "warning")
        assert [(i.kind, i.severity, i.position) for i in issues] == [(*expected, at)], cut


def _expected_kinds(header: BatchHeader, field: int, flipped: int) -> set[str]:
    """Issue kinds acceptable as the first report of a flip at ``field`` bytes into ``header``."""
    if field < 8:  # baseOffset: outside every checksum
        return {"offset_order"}
    if field < 12:  # size: framing changes
        return {"bad_length", "truncated_tail", "crc_mismatch", "bad_magic", "corrupt_record",
                "decompression_error", "zero_filled_tail"}
    if header.magic == 2 and field < 16:  # partitionLeaderEpoch: not covered by the CRC
        return set()
    if field == 16:  # magic
        if flipped in (0, 1, 2):  # another format: its own checks fail
            return {"crc_mismatch", "corrupt_record", "bad_length", "decompression_error", "bad_magic"}
        return {"bad_magic"}
    return {"crc_mismatch"}  # stored CRC or a covered byte


@pytest.mark.parametrize(("name", "data"), SOURCES, ids=[n for n, _ in SOURCES])
def test_single_bit_flip_at_every_byte(name: str, data: bytes) -> None:
    ref = _reference(data)
    for index in range(len(data)):
        header = next(h for h in ref if h.position <= index < h.position + h.size_bytes)
        field = index - header.position
        for bit in range(8):
            damaged = bytearray(data)
            damaged[index] ^= 1 << bit
            items = _walk(bytes(damaged))
            where = f"byte {index} bit {bit} (field +{field} of batch at {header.position})"
            # everything before the damaged batch is untouched
            assert _before(items, header.position) == [h for h in ref if h.position < header.position], where
            issues = [i for i in items if isinstance(i, DecodeIssue) and i.position >= header.position]
            allowed = _expected_kinds(header, field, damaged[index] if field == 16 else -1)
            if not allowed:
                assert issues == [], where
                changed = [i for i in items if isinstance(i, BatchHeader) and i.position == header.position]
                assert changed and changed[0].partition_leader_epoch != header.partition_leader_epoch, where
                continue
            if field < 8:
                # outside every checksum: only visible as new offsets (or a broken order / wrapper)
                got = [i for i in items if isinstance(i, BatchHeader) and i.position == header.position]
                if got:
                    assert (got[0].base_offset, got[0].last_offset) != (header.base_offset, header.last_offset), where
                else:
                    assert header.magic < 2 and issues and issues[0].kind == "corrupt_record", where
                assert all(i.kind in ("offset_order", "corrupt_record") for i in issues), where
            else:
                assert issues, where
                first = issues[0]
                assert first.position == header.position, where
                assert first.kind in allowed, (where, first)
                if first.kind == "crc_mismatch":
                    assert first.severity == "error"
            framing_lost = 8 <= field < 12 or any(i.kind == "bad_length" for i in issues)
            if not framing_lost:
                # framing intact: every later batch decodes as before
                later = [i for i in items if isinstance(i, BatchHeader) and i.position > header.position]
                assert later == [h for h in ref if h.position > header.position], where


@pytest.mark.parametrize(("name", "data"), SOURCES, ids=[n for n, _ in SOURCES])
def test_max_size_field_does_not_allocate(name: str, data: bytes) -> None:
    ref = _reference(data)
    for victim in ref:
        damaged = bytearray(data)
        struct.pack_into(">i", damaged, victim.position + 8, 0x7FFFFFFF)
        frozen = bytes(damaged)
        tracemalloc.start()
        try:
            items = list(iter_batches(frozen))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 256 * 1024, peak
        assert items[:-1] == [h for h in ref if h.position < victim.position]
        last = items[-1]
        assert isinstance(last, DecodeIssue)
        assert (last.kind, last.severity, last.position) == ("truncated_tail", "warning", victim.position)


@pytest.mark.parametrize(("name", "data"), SOURCES, ids=[n for n, _ in SOURCES])
@pytest.mark.parametrize("zeros", [1, 12, 17, 61, 1000, 1 << 17])
def test_zero_filled_tail(name: str, data: bytes, zeros: int) -> None:
    ref = _reference(data)
    items = list(iter_batches(data + bytes(zeros)))
    assert items[:-1] == ref
    assert items[-1] == DecodeIssue(len(data), "zero_filled_tail", "info", f"{zeros} zero bytes after the last entry")


@pytest.mark.parametrize(("name", "data"), SOURCES, ids=[n for n, _ in SOURCES])
def test_zeroed_middle_is_bad_framing_not_a_tail(name: str, data: bytes) -> None:
    """Zeros in the middle followed by data: not a preallocated tail, framing is lost."""
    ref = _reference(data)
    victim = ref[0]
    damaged = bytearray(data)
    damaged[: victim.size_bytes] = bytes(victim.size_bytes)
    items = list(iter_batches(bytes(damaged)))
    assert len(items) == 1 and isinstance(items[0], DecodeIssue)
    assert (items[0].kind, items[0].severity, items[0].position) == ("bad_length", "error", 0)
