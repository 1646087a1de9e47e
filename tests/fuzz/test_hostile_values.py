"""Hand-aimed lies: 2 GiB length and count fields, unknown versions and tagged fields.

The random suite (``test_mutations``) may or may not hit these exact values; here every seed
batch gets them, and ``__transaction_state`` values are generated with unknown versions and
unknown tagged fields rather than damaged at random.
"""

from __future__ import annotations

import functools
import struct
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.profiles import FUZZ
from tests.fuzz.targets import MEMORY_SLACK, fix_crcs, log_seeds, run_task
from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import BatchHeader, Record, TopicPartitions, TxnLogValue
from txn_audit.formats.primitives import INT32_MAX, pack_i16, pack_i64, write_uvarint
from txn_audit.formats.record_batch import encode_batch
from txn_audit.formats.segment import iter_batches
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value, encode_txn_log_key, encode_txn_log_value

T0 = 1_795_377_608_870
SEEDS = log_seeds()


@functools.cache
def _warm(topic: str, intact: bytes) -> None:
    run_task("log", topic, intact)  # first use compiles the column-wise walk: not the decode's memory


def _decode_bounded(topic: str, data: bytes, intact: bytes) -> dict[str, list[dict[str, object]]]:
    _warm(topic, intact)
    tracemalloc.start()
    try:
        rows = run_task("log", topic, data)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(data) + MEMORY_SLACK, peak
    return rows


@pytest.mark.parametrize("seed", SEEDS, ids=[s.name for s in SEEDS])
@pytest.mark.parametrize(("field", "fmt", "value", "fix_crc"), [
    (8, ">i", INT32_MAX, False),   # batch size: 2 GiB
    (8, ">i", -(2**31), False),    # batch size: most negative
    (57, ">i", INT32_MAX, True),   # v2 records count: 2**31 - 1 records promised, CRC made to agree
    (57, ">i", -1, True),          # a negative count: once silently skipped on __transaction_state
    (0, ">q", 2**63 - 1, False),   # base offset at the long maximum: last offset must wrap as in Kafka
    (53, ">i", -(2**31), True),    # base sequence at the int minimum: last sequence must stay an int32
    (23, ">i", -(2**31), True),    # last offset delta at the int minimum
])
def test_huge_or_negative_fields_are_issues_not_allocations(
    seed, field: int, fmt: str, value: int, fix_crc: bool
) -> None:
    headers = [h for h in iter_batches(seed.data) if isinstance(h, BatchHeader)]
    aimed = headers if len(headers) <= 6 else headers[:3] + headers[-3:]  # first, middle-ish and last
    for h in aimed:
        if field > 16 and h.magic != 2:
            continue
        damaged = bytearray(seed.data)
        struct.pack_into(fmt, damaged, h.position + field, value)
        data = fix_crcs(bytes(damaged)) if fix_crc else bytes(damaged)
        rows = _decode_bounded(seed.topic, data, seed.data)
        issues = rows["decode_issues"]
        assert not any(i["kind"] == "decoder_error" for i in issues), issues
        before = [b for b in rows["batches"] if b["position"] < h.position]
        assert len(before) == sum(1 for x in headers if x.position < h.position)
        if field == 8:  # framing lost at the batch: reported there, nothing decoded from it on
            assert issues and issues[0]["position"] == h.position, issues
            assert issues[0]["kind"] in ("truncated_tail", "bad_length"), issues
        elif field == 57 and (h.is_control or seed.topic in ("__transaction_state", "__consumer_offsets")):
            # the records are parsed here: the count that disagrees with them is reported
            assert any(i["kind"] == "corrupt_record" and i["position"] >= h.position for i in issues), issues


def _value(version: int = 1) -> TxnLogValue:
    return TxnLogValue(
        version=version, producer_id=7, producer_epoch=3, txn_timeout_ms=60000, state_code=1,
        topic_partitions=(TopicPartitions("orders", (0, 2)),), txn_last_update_timestamp=T0,
        txn_start_timestamp=T0 - 5)


@FUZZ
@given(
    unknown=st.dictionaries(st.integers(4, 2**20), st.binary(max_size=40), max_size=5),
    previous=st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)),
)
def test_unknown_tagged_fields_are_skipped_and_named(unknown: dict[int, bytes], previous: int | None) -> None:
    base = encode_txn_log_value(_value())
    assert base.endswith(b"\x00")  # no tagged fields: the count is the last byte
    tags = dict(unknown)
    if previous is not None:
        tags[0] = pack_i64(previous)  # previousProducerId, a known tag, among unknown ones
    body = b"".join(write_uvarint(t) + write_uvarint(len(p)) + p for t, p in sorted(tags.items()))
    got = decode_txn_log_value(base[:-1] + write_uvarint(len(tags)) + body)
    assert got is not None
    assert got.unknown_tags == tuple(sorted(unknown))
    assert got.previous_producer_id == (-1 if previous is None else previous)
    assert (got.producer_id, got.topic_partitions, got.txn_start_timestamp) == (7, _value().topic_partitions, T0 - 5)


@FUZZ
@given(st.integers(-(2**15), 2**15 - 1).filter(lambda v: v not in (0, 1)), st.binary(max_size=64))
def test_unknown_value_versions_are_unknown_version(version: int, rest: bytes) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_value(pack_i16(version) + encode_txn_log_value(_value(1))[2:] + rest)
    assert err.value.kind == "unknown_version" and err.value.position == 0


@FUZZ
@given(st.integers(-(2**15), 2**15 - 1).filter(lambda v: v != 0))
def test_unknown_key_versions_are_unknown_version(version: int) -> None:
    with pytest.raises(CorruptInputError) as err:
        decode_txn_log_key(pack_i16(version) + encode_txn_log_key("app-1")[2:])
    assert err.value.kind == "unknown_version"


def test_worker_reports_unknown_versions_and_keeps_the_other_records() -> None:
    values = [encode_txn_log_value(_value(0)), pack_i16(7) + encode_txn_log_value(_value(1))[2:],
              encode_txn_log_value(_value(1))]
    records = [Record(i, T0 + i, encode_txn_log_key(f"app-{i}"), v) for i, v in enumerate(values)]
    records.append(Record(3, T0 + 3, pack_i16(5) + encode_txn_log_key("app-3")[2:], values[0]))
    segment = encode_batch(records, base_offset=0, producer_id=-1, producer_epoch=-1, base_sequence=-1)
    rows = run_task("log", "__transaction_state", segment)
    assert [r["transactional_id"] for r in rows["txn_log"]] == ["app-0", "app-2"]
    assert [r["value_version"] for r in rows["txn_log"]] == [0, 1]
    issues = [(i["kind"], i["severity"]) for i in rows["decode_issues"]]
    assert issues == [("unknown_version", "warning")] * 2
    assert "record at offset 1" in rows["decode_issues"][0]["detail"]
    assert "record at offset 3" in rows["decode_issues"][1]["detail"]
