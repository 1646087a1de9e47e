"""The vectorised marker path gives the reference decoder's markers, or leaves the batch to it.

Checked on every ``.log`` of the real corpus (markers written by Kafka 3.6.2 brokers) and of
the sample dump, and on canonical markers whose record bytes and header fields are mutated
(with the CRC recomputed, so the mutation reaches the marker decoder).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.formats._corpus import dumped_log_files, ids, log_path
from txn_audit.errors import CorruptInputError
from txn_audit.formats.fast_headers import decode_headers
from txn_audit.formats.fast_markers import CANONICAL_SIZE, canonical_markers
from txn_audit.formats.model import ControlMarker
from txn_audit.formats.record_batch import MARKER_TYPE_NAMES, control_marker_of, encode_control_batch

REPO = Path(__file__).resolve().parents[2]
CASES = dumped_log_files()
T0 = 1_795_377_608_870


def _reference(buf: bytes, header: object) -> ControlMarker | None | str:
    try:
        return control_marker_of(buf, header)  # type: ignore[arg-type]
    except CorruptInputError as err:
        return err.kind


def _check(buf: bytes) -> tuple[int, int]:
    """Every canonical marker equals the reference's; returns (markers, read column-wise)."""
    cols = decode_headers(buf).columns
    controls = np.flatnonzero(cols.is_control & cols.crc_ok)
    fast = canonical_markers(buf, cols, controls)
    assert set(fast.rows.tolist()) <= set(controls.tolist())
    for i, row in enumerate(fast.rows.tolist()):
        ref = _reference(buf, cols.header(row))
        assert isinstance(ref, ControlMarker), (row, ref)
        got = ControlMarker(
            int(fast.offset[i]), int(fast.producer_id[i]), int(fast.producer_epoch[i]),
            MARKER_TYPE_NAMES[int(fast.control_type[i])], int(fast.control_type[i]), int(fast.coordinator_epoch[i]),
            int(fast.timestamp[i]), int(fast.key_version[i]), int(fast.value_version[i]),
        )
        assert got == ref
    return len(controls), len(fast)


@pytest.mark.parametrize(("scenario", "dumped"), CASES, ids=ids(CASES))
def test_real_corpus(scenario: str, dumped: object) -> None:
    buf = log_path(scenario, dumped).read_bytes()  # type: ignore[arg-type]
    markers, fast = _check(buf)
    assert fast == markers  # every marker a Kafka broker wrote is canonical


def test_sample_dump() -> None:
    total = 0
    for path in sorted((REPO / "sample_data" / "dump").rglob("*.log")):
        markers, fast = _check(path.read_bytes())
        total += fast
    assert total > 10


def _marker(**kwargs: object) -> bytearray:
    args: dict[str, object] = dict(offset=40, producer_id=7, producer_epoch=3, marker_type="COMMIT",
                                   coordinator_epoch=5, timestamp=T0)
    args.update(kwargs)
    return bytearray(encode_control_batch(**args))  # type: ignore[arg-type]


def test_canonical_layout() -> None:
    for marker_type in ("COMMIT", "ABORT"):
        batch = _marker(marker_type=marker_type)
        assert len(batch) == CANONICAL_SIZE
        assert _check(bytes(batch)) == (1, 1)


def _mutated(edits: list[tuple[int, int]], epoch: int = 5) -> bytes:
    batch = _marker(coordinator_epoch=epoch)
    batch[35:43] = (T0 + 999).to_bytes(8, "big")  # max timestamp differs from the first (LogAppendTime shows it)
    for at, value in edits:
        batch[at] = value
    batch[17:21] = crc32c(bytes(batch[21:])).to_bytes(4, "big")
    return bytes(_marker(offset=10)) + bytes(batch)  # a canonical marker first, the mutated one second


@pytest.mark.parametrize(
    ("edits", "canonical"),
    [
        ([], True),
        ([(22, 0x28)], True),  # LogAppendTime: the record's timestamp is the batch's max timestamp
        ([(22, 0x21)], False),  # compressed
        ([(22, 0x60)], False),  # delete horizon
        ([(60, 2)], False),  # two records declared
        ([(61, 0x1E)], False),  # record length 15
        ([(63, 0x02)], False),  # timestamp delta 1
        ([(64, 0x02)], False),  # offset delta 1
        ([(65, 0x06)], False),  # key length 3
        ([(66, 0x80)], False),  # negative key version
        ([(69, 0x02)], False),  # control type 2: not a transaction marker
        ([(68, 0x01)], False),  # control type 256
        ([(70, 0x0A)], False),  # value length 5
        ([(71, 0xFF), (72, 0xFF)], False),  # value version -1
        ([(77, 0x02)], False),  # one header
        ([(62, 0x7F)], True),  # record attributes are not read
        ([(66, 0x01), (71, 0x02)], True),  # newer key and value versions
    ],
)
def test_mutated_markers(edits: list[tuple[int, int]], canonical: bool) -> None:
    buf = _mutated(edits)
    markers, fast = _check(buf)
    assert markers == 2 and fast == (2 if canonical else 1)


INTERESTING = [21, 22, *range(57, 61), *range(61, CANONICAL_SIZE)]


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(st.tuples(st.sampled_from(INTERESTING), st.integers(0, 255)), min_size=1, max_size=3),
    epoch=st.integers(-(1 << 31), (1 << 31) - 1),
)
def test_randomly_mutated_markers(edits: list[tuple[int, int]], epoch: int) -> None:
    buf = _mutated(edits, epoch)
    cols = decode_headers(buf).columns
    if len(cols) < 2 or not bool(cols.is_control[1]):
        return  # no longer a whole control batch: nothing for the marker decoders
    _check(buf)
