"""kafka-transactions.sh tables, checked against the binary logdirs and SCENARIOS.md/expected.json."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.realcorpus import SCENARIOS, expected_json, needs_corpus, scenario_dir
from txn_audit.formats.input_kind import (
    BINARY,
    DUMP_LOG,
    EMPTY,
    GET_OFFSETS,
    OFFSETS_JSON,
    TEXT,
    is_text_dump,
    sniff_bytes,
    sniff_file,
)
from txn_audit.formats.layout import TRANSACTION_STATE_TOPIC, parse_log_file_name
from txn_audit.formats.model import BatchHeader, IssueKind
from txn_audit.formats.record_batch import decode_records
from txn_audit.formats.segment import iter_batches
from txn_audit.formats.snapshot import decode_producer_snapshot
from txn_audit.formats.transactions_text import (
    DescribedProducer,
    DescribedTransaction,
    HangingTransaction,
    ListedTransaction,
    parse_transactions_output,
)
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value


def _tool_files() -> list[tuple[str, Path]]:
    return [(s, p) for s in SCENARIOS for p in sorted((scenario_dir(s) / "tools").glob("kafka-transactions-*.txt"))]


TOOL_FILES = _tool_files()


def _kind_from_name(name: str) -> str:
    stem = name.removeprefix("kafka-transactions-").removesuffix(".txt")
    for kind in ("describe-producers", "find-hanging", "describe", "list"):
        if stem.startswith(kind):
            return kind
    raise AssertionError(name)


def _last_coordinator_records(scenario: str) -> dict[str, tuple[int, object]]:
    """transactional id → (offset, value) of its last ``__transaction_state`` record, from the binary logs."""
    last: dict[str, tuple[int, object]] = {}
    for log in sorted((scenario_dir(scenario) / "logdirs").glob(f"{TRANSACTION_STATE_TOPIC}-*/*.log")):
        data = log.read_bytes()
        for h in iter_batches(data):
            if isinstance(h, BatchHeader) and not h.is_control:
                for r in decode_records(data, h):
                    key = decode_txn_log_key(r.key)  # type: ignore[arg-type]
                    if key.transactional_id not in last or last[key.transactional_id][0] < r.offset:
                        last[key.transactional_id] = (r.offset, decode_txn_log_value(r.value))
    return last


@needs_corpus
@pytest.mark.parametrize(("scenario", "path"), TOOL_FILES, ids=[f"{s}:{p.stem}" for s, p in TOOL_FILES])
def test_realcorpus_tables_parse(scenario: str, path: Path) -> None:
    out = parse_transactions_output(path)
    assert out.issues == []
    assert out.kind == _kind_from_name(path.name)
    assert out.command is not None and out.command.startswith("bin/kafka-transactions.sh")
    assert out.run_at_ms is not None and out.run_at_ms > 1_700_000_000_000
    assert sniff_file(path) == "kafka_transactions_" + out.kind.replace("-", "_")
    expected = expected_json(scenario)
    ids = expected["transactional_ids"]
    if out.kind == "list":
        assert all(isinstance(r, ListedTransaction) for r in out.rows)
        assert {r.transactional_id: (r.producer_id, r.state) for r in out.rows} == {  # type: ignore[union-attr]
            tid: (v["producer_id"], v["state"]) for tid, v in ids.items()
        }
    elif out.kind == "describe":
        (row,) = out.rows
        assert isinstance(row, DescribedTransaction)
        want = ids[row.transactional_id]
        assert (row.producer_id, row.producer_epoch, row.state, row.txn_timeout_ms) == (
            want["producer_id"], want["producer_epoch"], want["state"], int(want["transaction_timeout_ms"])
        )
        assert ",".join(f"{t}-{p}" for t, p in row.topic_partitions) == want["topic_partitions"]
        # the coordinator's view equals the id's last __transaction_state record on disk
        _, value = _last_coordinator_records(scenario)[row.transactional_id]
        assert (value.producer_id, value.producer_epoch, value.state, value.txn_timeout_ms) == (  # type: ignore[attr-defined]
            row.producer_id, row.producer_epoch, row.state, row.txn_timeout_ms
        )
        listed = sorted((tp.topic, p) for tp in value.topic_partitions or () for p in tp.partitions)  # type: ignore[attr-defined]
        assert sorted(row.topic_partitions) == listed
        assert row.current_txn_start_time_ms == value.txn_start_timestamp  # type: ignore[attr-defined]
    elif out.kind == "describe-producers":
        assert all(isinstance(r, DescribedProducer) for r in out.rows)
        topic, partition = out.command.split("--topic ")[1].split()[0], int(out.command.split("--partition ")[1])
        assert all((r.topic, r.partition) == (topic, partition) for r in out.rows)  # type: ignore[union-attr]
        # the leader's producer state equals the snapshot the broker wrote at its clean shutdown
        snapshots = sorted((scenario_dir(scenario) / "logdirs" / f"{topic}-{partition}").glob("*.snapshot"))
        entries = decode_producer_snapshot(snapshots[-1].read_bytes()).entries if snapshots else ()
        want_rows = sorted(
            (e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_sequence, e.timestamp,
             None if e.current_txn_first_offset < 0 else e.current_txn_first_offset)
            for e in entries
        )
        got_rows = sorted(
            (r.producer_id, r.producer_epoch, r.coordinator_epoch, r.last_sequence, r.last_timestamp,  # type: ignore[union-attr]
             r.current_txn_start_offset)  # type: ignore[union-attr]
            for r in out.rows
        )
        assert got_rows == want_rows
    else:
        rows = expected["find_hanging"]["rows"]
        assert all(isinstance(r, HangingTransaction) for r in out.rows)
        assert [
            (r.topic, r.partition, r.producer_id, r.producer_epoch, r.coordinator_epoch, r.start_offset,  # type: ignore[union-attr]
             r.last_timestamp, r.duration_min)  # type: ignore[union-attr]
            for r in out.rows
        ] == [
            (w["Topic"], int(w["Partition"]), int(w["ProducerId"]), int(w["ProducerEpoch"]),
             int(w["CoordinatorEpoch"]), int(w["StartOffset"]), int(w["LastTimestamp"]), int(w["Duration(min)"]))
            for w in rows
        ]
        for r in out.rows:  # Duration(min) is whole minutes between LastTimestamp and the run
            assert r.duration_min == (out.run_at_ms - r.last_timestamp) // 60_000  # type: ignore[operator,union-attr]


@needs_corpus
def test_find_hanging_only_in_the_hanging_scenario() -> None:
    found = {s: parse_transactions_output(scenario_dir(s) / "tools" / "kafka-transactions-find-hanging.txt").rows
             for s in SCENARIOS}
    assert {s for s, rows in found.items() if rows} == {"hanging-unadded-partition"}


@needs_corpus
def test_sniffing_the_corpus() -> None:
    scenario = SCENARIOS[0]
    tools = scenario_dir(scenario) / "tools"
    for path in (tools / "dump-log").glob("*.txt"):
        assert sniff_file(path) == DUMP_LOG
    assert sniff_file(tools / "offsets.json") == OFFSETS_JSON
    for path in (scenario_dir(scenario) / "logdirs").rglob("0*"):
        name = parse_log_file_name(path.name)
        if name is None or not path.is_file():
            continue
        kind = sniff_file(path)
        if path.stat().st_size == 0:
            assert kind == EMPTY
        else:
            assert kind in (f"{BINARY}_{name.kind}", TEXT), (path, kind)  # a tiny index can be valid UTF-8


def test_sniff_bytes() -> None:
    assert sniff_bytes(b"") == EMPTY
    assert sniff_bytes(b"# comment\n\nDumping x/t-0/00000000000000000000.log\n") == DUMP_LOG
    assert sniff_bytes(b"Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\t"
                       b"Duration(min)\t\n") == "kafka_transactions_find_hanging"
    assert sniff_bytes(b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00H\x00\x00\x00\x00\x02", "00000000000000000000.log") \
        == "binary_log"
    assert sniff_bytes(b"\xff\xfe\x00", "notes") == BINARY
    # a dump-log dump with a zero-filled stretch (a damaged copy) is still read as one
    assert sniff_bytes(b"\x00\x00\n# c\nDumping x/t-0/00000000000000000000.log\nbase\x00\x00\n") == DUMP_LOG
    assert sniff_bytes(b"\x00\x00\x00\x00hello\n") == BINARY
    assert sniff_bytes(b"hello\n") == TEXT
    assert sniff_bytes(b"# $ kafka-get-offsets.sh --time -1\norders:0:1368\norders:1:1378\n") == GET_OFFSETS
    assert sniff_bytes(b"orders:0:1368\nnot an offset line\n") == TEXT
    assert sniff_bytes(b'[{"topic": "t", "partition": 0, "high_watermark": 5}]') == OFFSETS_JSON
    assert sniff_bytes(b'{"other": 1}') == TEXT
    assert is_text_dump(DUMP_LOG) and is_text_dump("kafka_transactions_list") and not is_text_dump(TEXT)


def test_garbage_and_variants() -> None:
    text = "\n".join([
        "some banner",  # 1: before the header
        "ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
        "CurrentTransactionStartOffset\t",  # 2
        "7         \t3            \t-1                    \t0           \t1795377608971\t42                           \t",
        "8 1 0 5 1795377608972 None",  # 4: tabs became spaces
        "9\tnot-a-number\t0\t1\t2\tNone\t",  # 5
        "10\t1\t0\t",  # 6: too few cells
    ])
    out = parse_transactions_output(text, topic="t", partition=3)
    assert out.kind == "describe-producers"
    assert [(r.producer_id, r.producer_epoch, r.coordinator_epoch, r.current_txn_start_offset, r.topic, r.partition)
            for r in out.rows] == [(7, 3, -1, 42, "t", 3), (8, 1, 0, None, "t", 3)]  # type: ignore[union-attr]
    assert [(i.line, i.kind) for i in out.issues] == [
        (1, IssueKind.UNPARSED_LINE), (5, IssueKind.UNPARSED_LINE), (6, IssueKind.UNPARSED_LINE)
    ]
    assert out.issues[2].to_decode_issue().position == 6


def test_describe_with_none_and_partitions() -> None:
    text = (
        "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\t"
        "CurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\t\n"
        "2\tmy.app-1\t17\t4\tEmpty\t60000\tNone\tNone\t\t\n"
        "2\tother\t18\t0\tOngoing\t60000\t100\t5\tmy-topic-0,my-topic-11\t\n"
    )
    out = parse_transactions_output(text)
    assert out.issues == []
    empty, ongoing = out.rows
    assert (empty.transactional_id, empty.current_txn_start_time_ms, empty.txn_duration_ms,  # type: ignore[union-attr]
            empty.topic_partitions) == ("my.app-1", None, None, ())  # type: ignore[union-attr]
    assert ongoing.topic_partitions == (("my-topic", 0), ("my-topic", 11))  # type: ignore[union-attr]
