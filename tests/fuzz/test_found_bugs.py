"""Regression tests for the bugs the mutation runs found (each listed in docs/reliability.md)."""

from __future__ import annotations

import struct

import pytest

from tests.fuzz.targets import fix_crcs, run_task
from tests.realcorpus import REALCORPUS
from txn_audit.formats.fast_headers import decode_headers
from txn_audit.formats.layout import parse_log_file_name
from txn_audit.formats.model import BatchHeader, Record
from txn_audit.formats.record_batch import encode_batch, increment_sequence
from txn_audit.formats.segment import iter_batches
from txn_audit.formats.transactions_text import DescribedProducer, parse_transactions_output

T0 = 1_795_377_608_870

PRODUCERS = (
    "# $ bin/kafka-transactions.sh --bootstrap-server 127.0.0.1:19092 describe-producers --topic crash --partition 1\n"
    "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\tCurrentTransactionStartOffset\t\n"
    "0         \t0            \t0                     \t39          \t1795377980158\tNone                         \t\n"
    "1         \t0            \t-1                    \t9           \t1795377980744\t\n"
)


def test_transactions_row_missing_its_last_cell_is_an_issue() -> None:
    """Was an IndexError: a row one cell short but ending in a tab came back one cell short."""
    out = parse_transactions_output(PRODUCERS, "p.txt")
    assert [r.producer_id for r in out.rows if isinstance(r, DescribedProducer)] == [0]
    assert [(i.line, i.kind) for i in out.issues] == [(4, "unparsed_line")]


@pytest.mark.parametrize("name", ["99999999999999999999.log", "9223372036854775808.index",
                                  "09223372036854775808.snapshot", "00000000000000000001-9999999999.checkpoint"])
def test_segment_names_beyond_kafkas_integers_are_not_segments(name: str) -> None:
    """Was an Arrow OverflowError: the base offset of such a name does not fit the int64 column."""
    assert parse_log_file_name(name) is None


def test_largest_segment_name_still_parses() -> None:
    parsed = parse_log_file_name("09223372036854775807.log")
    assert parsed is not None and parsed.base_offset == 2**63 - 1


@pytest.mark.parametrize(("old", "new", "field"), [
    ("lastOffset: 9 ", "lastOffset: 99999999999999999999 ", "last_offset"),
    ("producerEpoch: 0 ", "producerEpoch: 2147483648 ", "producer_epoch"),  # an int32 column
])
def test_text_numbers_beyond_their_column_are_issues(old: str, new: str, field: str) -> None:
    """Was an Arrow OverflowError when the worker's rows were drained (it ended the Spark task)."""
    path = REALCORPUS / "timeout-abort/tools/dump-log/tmo-0.txt"
    if not path.is_file():
        pytest.skip("real corpus not found")
    text = path.read_text()
    first = next(x for x in text.split("\n") if x.startswith("baseOffset: 0 "))
    assert old in first
    damaged = text.replace(first, first.replace(old, new), 1)
    rows = run_task("dumplog_text", "t", damaged.encode(), name="dump.txt")
    wrong = [i for i in rows["decode_issues"] if i["kind"] == "unparsed_line"]
    assert len(wrong) == 1 and field in wrong[0]["detail"] and wrong[0]["severity"] == "error", rows["decode_issues"]
    clean = run_task("dumplog_text", "t", text.encode(), name="dump.txt")
    assert len(rows["batches"]) == len(clean["batches"]) - 1


@pytest.mark.parametrize(("sequence", "increment", "java"), [
    (5, 3, 8),
    (2**31 - 2, 3, 1),                 # Kafka's wrap into the non-negative space
    (-(2**31), -(2**31), 0),           # damaged: Java int arithmetic, not Python's unbounded ints
    (-2_000_000_000, -1_400_000_000, 894_967_296),
])
def test_increment_sequence_is_javas(sequence: int, increment: int, java: int) -> None:
    assert increment_sequence(sequence, increment) == java


def _batch(**changes: int) -> bytes:
    data = bytearray(encode_batch([Record(0, T0, b"k", b"v"), Record(1, T0, b"k", b"v")], base_offset=0,
                                  producer_id=1, producer_epoch=0, base_sequence=0))
    for field, (at, fmt) in {"base_offset": (0, ">q"), "last_offset_delta": (23, ">i"),
                             "base_sequence": (53, ">i")}.items():
        if field in changes:
            struct.pack_into(fmt, data, at, changes[field])
    return fix_crcs(bytes(data))


@pytest.mark.parametrize("changes", [
    {"base_offset": 2**63 - 1},
    {"base_sequence": -2_000_000_000, "last_offset_delta": -1_400_000_000},
])
def test_derived_header_fields_stay_in_their_columns(changes: dict[str, int]) -> None:
    """Were an OverflowError (last offset past the long) and an ArrowInvalid (last sequence past the int)."""
    data = _batch(**changes)
    (header,) = [h for h in iter_batches(data) if isinstance(h, BatchHeader)]
    assert -(2**63) <= header.last_offset < 2**63 and -(2**31) <= header.last_sequence < 2**31
    assert decode_headers(data).columns.headers() == [header]  # the column-wise walk computes the same
    rows = run_task("log", "t", data)
    assert [b["last_sequence"] for b in rows["batches"]] == [header.last_sequence]
    assert not [i for i in rows["decode_issues"] if i["kind"] == "decoder_error"]


def test_negative_record_count_on_transaction_state_is_reported() -> None:
    """Was a silent skip: the records of a batch claiming -1 records were neither read nor reported."""
    data = bytearray(encode_batch([Record(0, T0, b"\x00\x00\x00\x01a", None)], base_offset=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1))
    struct.pack_into(">i", data, 57, -1)
    rows = run_task("log", "__transaction_state", fix_crcs(bytes(data)))
    assert [(i["kind"], i["position"]) for i in rows["decode_issues"]] == [("corrupt_record", 57)]
