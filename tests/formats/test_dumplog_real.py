"""Real ``kafka-dump-log`` text of every Kafka release in ``tests/corpus`` (and of the 3.6.2
corpus in ``../shared/realcorpus``) read back into exactly what the binary decoders give for the
same files.

Each ``tools/dump-log/[broker-<id>/]<partition>.txt`` of a corpus scenario is what the real
release's ``kafka-dump-log.sh --print-data-log`` (``--deep-iteration``, ``--transaction-log-decoder``
or ``--offsets-decoder``) printed for the ``.log``, ``.snapshot`` and ``.txnindex`` files of the
partition copied to ``logdirs/``. The text parser (``dumplog_text``) must give, field by field,
what the binary decoders (``segment``, ``record_batch``, ``txn_state``, ``snapshot``, ``txnindex``)
give for those files, for every release: a field the text does not carry is ``None`` exactly
where the parser documents it (``deleteHorizonMs`` before 3.2, the start timestamp and tagged
fields of a coordinator record before the JSON form of 4.1, ...), never a different value. The
offset commits of ``__consumer_offsets`` are compared in ``test_dumplog_text.py`` (d); here their
batches are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafkacorpus import scenarios
from tests.realcorpus import SCENARIOS as REALCORPUS_SCENARIOS
from tests.realcorpus import expected_json, scenario_dir
from txn_audit.formats.layout import CLUSTER_METADATA_TOPIC
from txn_audit.formats.dumplog_text import ParsedDumpLog, TextBatch, parse_dump_log
from txn_audit.formats.layout import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, parse_log_file_name
from txn_audit.formats.model import TIMESTAMP_TYPE_NAMES, BatchHeader, DecodeIssue, IssueKind, Record
from txn_audit.formats.record_batch import control_marker_of, decode_records
from txn_audit.formats.segment import iter_batches
from txn_audit.formats.snapshot import decode_producer_snapshot, first_sequence, has_batch_metadata
from txn_audit.formats.txn_state import decode_txn_log_key, decode_txn_log_value
from txn_audit.formats.txnindex import decode_txn_index


@dataclass(frozen=True)
class RealDump:
    """One real dump-log text file of a corpus scenario."""

    version: str  # the Kafka release whose tool printed it
    scenario: str
    folder: Path  # the scenario folder: the text's ``Dumping`` paths are relative to it
    text: Path

    @property
    def id(self) -> str:
        partition = self.text.relative_to(self.folder / "tools" / "dump-log").with_suffix("")
        return f"{self.version}/{self.scenario}/{partition}"

    @property
    def release(self) -> tuple[int, ...]:
        return tuple(int(p) for p in self.version.split("."))


def _real_dumps() -> list[RealDump]:
    """The committed corpus, and the 3.6.2 corpus read in place from ``../shared/realcorpus``."""
    folders = [(s.version, s.name, s.folder) for s in scenarios()]
    folders += [(str(expected_json(name)["kafka_version"]), f"shared-{name}", scenario_dir(name))
                for name in REALCORPUS_SCENARIOS]
    # the KRaft metadata log's dumps (--cluster-metadata-decoder) are checked by test_cluster_metadata.py,
    # the tiered storage's (--remote-log-metadata-decoder) by test_remote_log_metadata.py
    return [RealDump(version, name, folder, p) for version, name, folder in folders
            for p in sorted((folder / "tools" / "dump-log").rglob("*.txt"))
            if not p.name.startswith((f"{CLUSTER_METADATA_TOPIC}-", "__remote_log_metadata-"))]


DUMPS = _real_dumps()

needs_dumps = pytest.mark.skipif(not DUMPS, reason="no complete scenario (with expected.json) in tests/corpus")


def _at_least(release: tuple[int, ...], major: int, minor: int) -> bool:
    return release[:2] >= (major, minor)


def _by_section(parsed: ParsedDumpLog, items: list) -> dict[str, list]:  # type: ignore[type-arg]
    out: dict[str, list] = {s.path: [] for s in parsed.sections}  # type: ignore[type-arg]
    for item in items:
        out[item.section.path].append(item)
    return out


# -- batches -----------------------------------------------------------------------------

#: batch fields every v2 batch line prints; the text must give exactly the binary's value
_BATCH_FIELDS = ("position", "base_offset", "last_offset", "record_count", "producer_id", "producer_epoch",
                 "base_sequence", "last_sequence", "is_transactional", "is_control", "partition_leader_epoch",
                 "stored_crc", "crc_ok", "magic", "max_timestamp", "size_bytes")


def _binary_batch(h: BatchHeader) -> dict[str, object]:
    out: dict[str, object] = {f: getattr(h, f) for f in _BATCH_FIELDS}
    out |= {"codec": h.codec_name, "timestamp_type": TIMESTAMP_TYPE_NAMES[h.timestamp_type],
            "computed_crc": h.computed_crc, "first_timestamp": h.first_timestamp,
            "delete_horizon_ms": h.delete_horizon_ms}
    return out


def _text_batch(b: TextBatch) -> dict[str, object]:
    """The text batch in ``_binary_batch``'s vocabulary (None where the text does not carry a field)."""
    out: dict[str, object] = {f: getattr(b, f) for f in _BATCH_FIELDS}
    out |= {"codec": b.codec, "timestamp_type": b.timestamp_type, "computed_crc": b.computed_crc,
            "first_timestamp": b.first_timestamp, "delete_horizon_ms": b.delete_horizon_ms}
    return out


def _unknown_in_text(h: BatchHeader, b: TextBatch, release: tuple[int, ...]) -> set[str]:
    """The batch fields the parser documents as absent from this text: there, and only there, it gives None."""
    unknown = set()
    if not _at_least(release, 3, 2):
        unknown.add("delete_horizon_ms")  # deleteHorizonMs: printed from 3.2
    if not b.records or b.timestamp_type != "CreateTime":
        unknown.add("first_timestamp")  # only the first record line's CreateTime gives it
    if not h.crc_ok:
        unknown.add("computed_crc")  # the text says isvalid: false, never the computed CRC
    return unknown


def _compare_batches(dump: RealDump, headers: list[BatchHeader], batches: list[TextBatch]) -> None:
    assert len(batches) == len(headers), f"{len(batches)} batch lines for {len(headers)} batches on disk"
    for h, b in zip(headers, batches, strict=True):
        want, got = _binary_batch(h), _text_batch(b)
        unknown = _unknown_in_text(h, b, dump.release)
        for name in unknown:
            assert got.pop(name) is None, f"{name} at position {h.position}: the text cannot carry it"
            want.pop(name)
        assert got == want, f"batch at position {h.position} (text line {b.line})"


def _compare_records(section_topic: str | None, data: bytes, h: BatchHeader, b: TextBatch) -> None:
    """Every record line of a batch against the decoded record (``--deep-iteration``)."""
    records: list[Record] = decode_records(data, h)
    assert len(b.records) == len(records), f"batch at position {h.position}: record lines vs records"
    data_topic = section_topic not in (TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC)
    for rec, line in zip(records, b.records, strict=True):
        got = (line.offset, line.timestamp, line.key_size, line.value_size, line.sequence, line.header_keys)
        want = (rec.offset, rec.timestamp, -1 if rec.key is None else len(rec.key),
                -1 if rec.value is None else len(rec.value), rec.sequence,
                ", ".join(x.key for x in rec.headers))
        assert got == want, f"record line {line.line}"
        if data_topic and not h.is_control:
            # the default decoder prints keys and values as UTF-8 text
            assert line.key == (None if rec.key is None else rec.key.decode()), f"record line {line.line}"
            assert line.payload == (None if rec.value is None else rec.value.decode()), f"record line {line.line}"


# -- the test ----------------------------------------------------------------------------


@needs_dumps
@pytest.mark.parametrize("dump", DUMPS, ids=[d.id for d in DUMPS])
def test_real_text_equals_binary(dump: RealDump) -> None:
    check_text_equals_binary(dump, dump.text)


def check_text_equals_binary(dump: RealDump, text: Path) -> None:
    """Assert that ``text`` (the dump's own file, or a changed copy of it) parses without issues into
    what the binary decoders give for the files of ``dump``'s scenario it names."""
    parsed = parse_dump_log(text)
    # the one issue real output may give: "Found N invalid bytes at the end of" a log whose tail is
    # torn or preallocated zeros (checked against the binary below); every other one is a bug
    tails = {i.section.path: i for i in parsed.issues if i.kind == IssueKind.TRUNCATED_TAIL and i.section}
    assert [(i.line, i.kind, i.reason, i.excerpt) for i in parsed.issues if i not in tails.values()] == []
    command = parsed.command
    assert command is not None and command.startswith("bin/kafka-dump-log.sh") and "--print-data-log" in command
    m = re.search(r"--files (\S+)", command)
    assert m is not None
    # every file the tool was given is dumped once, in the order given
    assert [s.path for s in parsed.sections] == m.group(1).split(",")
    versions = parsed.kafka_versions()
    assert versions is not None
    low, high = (tuple(int(p) for p in v.split(".")) for v in versions)
    # the features seen bound the release
    assert low <= dump.release[:2] <= high, versions

    batches = _by_section(parsed, parsed.batches)
    markers = _by_section(parsed, parsed.markers)
    txn_log = _by_section(parsed, parsed.txn_log)
    snapshots = _by_section(parsed, parsed.snapshots)
    aborted = _by_section(parsed, parsed.aborted_txns)
    for section in parsed.sections:
        binary = dump.folder / section.path
        assert binary.is_file(), section.path
        assert (section.topic, section.partition) == (binary.parent.name.rsplit("-", 1)[0],
                                                       int(binary.parent.name.rsplit("-", 1)[1]))
        assert section.log_dir == str(binary.parent.parent.relative_to(dump.folder))
        assert section.base_offset == parse_log_file_name(binary.name).base_offset  # type: ignore[union-attr]
        data = binary.read_bytes()
        if section.kind == "log":
            items = list(iter_batches(data))
            issues = [i.kind for i in items if isinstance(i, DecodeIssue)]
            if section.path in tails:
                assert issues in (["truncated_tail"], ["zero_filled_tail"])
            else:
                assert issues == []
            headers = [i for i in items if isinstance(i, BatchHeader)]
            _compare_batches(dump, headers, batches[section.path])
            for h, b in zip(headers, batches[section.path], strict=True):
                _compare_records(section.topic, data, h, b)
            _compare_markers(data, headers, markers[section.path])
            if section.topic == TRANSACTION_STATE_TOPIC:
                _compare_txn_log(dump, data, headers, txn_log[section.path])
            else:
                assert txn_log[section.path] == []
        elif section.kind == "snapshot":
            _compare_snapshot(dump, data, snapshots[section.path])
        elif section.kind == "txnindex":
            entries, issues = decode_txn_index(data, segment_base_offset=section.base_offset or 0)
            assert issues == []
            assert [a.entry for a in aborted[section.path]] == entries
        else:
            pytest.fail(f"unexpected section kind {section.kind} for {section.path}")


def _compare_markers(data: bytes, headers: list[BatchHeader], got: list) -> None:  # type: ignore[type-arg]
    want = [
        (m.offset, m.producer_id, m.producer_epoch, m.marker_type, m.control_type, m.coordinator_epoch, m.timestamp,
         h.position)
        for h in headers if h.is_control and (m := control_marker_of(data, h)) is not None
    ]
    assert [(m.offset, m.producer_id, m.producer_epoch, m.marker_type, m.control_type, m.coordinator_epoch,
             m.timestamp, m.position) for m in got] == want
    # the text never shows a marker's key and value versions
    assert all(m.key_version is None and m.value_version is None for m in got)


#: coordinator-record fields only the JSON form of 4.1+ prints (None in the text forms before)
_TXN_JSON_ONLY = ("value_version", "txn_start_timestamp", "previous_producer_id", "next_producer_id",
                  "next_producer_epoch", "client_transaction_version")


def _compare_txn_log(
    dump: RealDump, data: bytes, headers: list[BatchHeader], got: list  # type: ignore[type-arg]
) -> None:
    json_form = _at_least(dump.release, 4, 1)
    want = []
    for h in headers:
        for r in decode_records(data, h):
            assert r.key is not None
            k, v = decode_txn_log_key(r.key), decode_txn_log_value(r.value)
            row: dict[str, object] = {
                "offset": r.offset, "record_timestamp": r.timestamp, "position": h.position,
                "transactional_id": k.transactional_id, "key_version": k.version, "tombstone": v is None,
            }
            if v is not None:
                parts = None if v.topic_partitions is None else [
                    (tp.topic, p) for tp in v.topic_partitions for p in tp.partitions]
                row |= {
                    "producer_id": v.producer_id, "producer_epoch": v.producer_epoch,
                    "txn_timeout_ms": v.txn_timeout_ms, "state_code": v.state_code, "state": v.state,
                    # before 4.1 the partitions are printed from a Set: their order is not the file's
                    "topic_partitions": parts if json_form or parts is None else sorted(parts),
                    "txn_last_update_timestamp": v.txn_last_update_timestamp,
                    "value_version": v.version, "txn_start_timestamp": v.txn_start_timestamp,
                    "previous_producer_id": v.previous_producer_id, "next_producer_id": v.next_producer_id,
                    "next_producer_epoch": v.next_producer_epoch,
                    "client_transaction_version": v.client_transaction_version,
                }
            else:
                row |= dict.fromkeys(("producer_id", "producer_epoch", "txn_timeout_ms", "state_code", "state",
                                      "topic_partitions", "txn_last_update_timestamp") + _TXN_JSON_ONLY)
            if not json_form:
                row |= dict.fromkeys(_TXN_JSON_ONLY)  # the text forms do not print them
            want.append(row)
    rows = []
    for t in got:
        parts = None if t.topic_partitions is None else list(t.topic_partitions)
        rows.append({
            "offset": t.offset, "record_timestamp": t.record_timestamp, "position": t.position,
            "transactional_id": t.transactional_id, "key_version": t.key_version, "tombstone": t.tombstone,
            "producer_id": t.producer_id, "producer_epoch": t.producer_epoch, "txn_timeout_ms": t.txn_timeout_ms,
            "state_code": t.state_code, "state": t.state,
            "topic_partitions": parts if json_form or parts is None else sorted(parts),
            "txn_last_update_timestamp": t.txn_last_update_timestamp,
            **{f: getattr(t, f) for f in _TXN_JSON_ONLY},
        })
    assert len(rows) == len(want)
    for g, w in zip(rows, want, strict=True):
        assert g == w, f"__transaction_state record at offset {w['offset']}"


def _compare_snapshot(dump: RealDump, data: bytes, got: list) -> None:  # type: ignore[type-arg]
    snap = decode_producer_snapshot(data)
    assert snap.crc_ok
    last_timestamp_printed = _at_least(dump.release, 3, 1)  # lastTimestamp: from 3.1
    want = [
        (e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta,
         e.timestamp if last_timestamp_printed or has_batch_metadata(e) else None,
         e.coordinator_epoch, e.current_txn_first_offset, has_batch_metadata(e),
         first_sequence(e) if has_batch_metadata(e) else None)
        for e in snap.entries
    ]
    assert [(e.producer_id, e.producer_epoch, e.last_sequence, e.last_offset, e.offset_delta, e.timestamp,
             e.coordinator_epoch, e.current_txn_first_offset, e.has_batch_metadata, e.first_sequence)
            for e in got] == want


@needs_dumps
def test_real_dumps_cover_every_row_kind() -> None:
    """Per release, the corpus text holds every kind of row compared above."""
    totals: dict[str, dict[str, int]] = {}
    for dump in DUMPS:
        parsed = parse_dump_log(dump.text)
        t = totals.setdefault(dump.version, dict.fromkeys(("batches", "markers", "txn_log", "snapshots",
                                                            "aborted_txns"), 0))
        for name in t:
            t[name] += len(getattr(parsed, name))
    assert {v: [n for n, c in t.items() if c == 0] for v, t in totals.items()} == {v: [] for v in totals}


# -- the comparison can fail ------------------------------------------------------------

_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort")

#: name → (pattern whose group 1 is changed, in the first line it matches; how to change it).
#: Each names a value the test above must check: changed in a real text, the text still parses
#: without issues and the comparison fails.
MUTATIONS: dict[str, tuple[str, object]] = {
    "batch crc": (r"(?m)^baseOffset: .* crc: (\d+) isvalid", 1),
    "batch position": (r"(?m)^baseOffset: .* position: (\d+) ", 1),
    "batch size": (r"(?m)^baseOffset: .* size: (\d+) ", 1),
    "batch max timestamp": (r"(?m)^baseOffset: .* CreateTime: (\d+) ", 1),
    "batch last offset": (r"(?m)^baseOffset: \d+ lastOffset: (\d+) ", 1),
    "batch count": (r"(?m)^baseOffset: .* count: (\d+) ", 1),
    "batch producer id": (r"(?m)^baseOffset: .* producerId: (\d+) ", 1),
    "batch producer epoch": (r"(?m)^baseOffset: .* producerEpoch: (\d+) ", 1),
    "batch base sequence": (r"(?m)^baseOffset: .* baseSequence: (\d+) ", 1),
    "batch partition leader epoch": (r"(?m)^baseOffset: .* partitionLeaderEpoch: (\d+) ", 1),
    "batch transactional flag": (r"(?m)^baseOffset: .* isTransactional: (true|false) ", {"true": "false",
                                                                                        "false": "true"}),
    "batch codec": (r"(?m)^baseOffset: .* compresscodec: (none|NONE) ", {"none": "gzip", "NONE": "GZIP"}),
    "record timestamp": (r"(?m)^\| offset: \d+ .*?CreateTime: (\d+) ", 1),
    "record sequence": (r"(?m)^\| offset: .* sequence: (\d+) headerKeys", 1),
    "record payload": (r"(?m)^\| offset: .* payload: (.+)$", "x"),
    "marker type": (r"endTxnMarker: (COMMIT|ABORT) ", {"COMMIT": "ABORT", "ABORT": "COMMIT"}),
    "marker coordinator epoch": (r"endTxnMarker: \w+ coordinatorEpoch: (\d+)", 1),
    "txn id": (r"(?:transactionalId=|\"transactionalId\":\")([^\" ]+)", "x"),
    "txn producer id": (r"(?:payload: producerId:|\"producerId\":)(\d+)", 1),
    "txn producer epoch": (r"(?:,producerEpoch:|\"producerEpoch\":)(\d+)", 1),
    "txn state": (r"(?:state=|\"transactionStatus\":)(\w+)", {**{s: "Dead" for s in _STATES},
                                                               **{str(i): "6" for i in range(6)}}),
    "txn partitions": (r"(?:partitions=\[[^\]]*-|\"partitionIds\":\[)(\d+)", 7),
    "txn timeout": (r"(?:txnTimeoutMs=|\"transactionTimeoutMs\":)(\d+)", 1),
    "txn last update": (r"(?:txnLastUpdateTimestamp=|\"transactionLastUpdateTimestampMs\":)(\d+)", 1),
    "txn start timestamp (JSON)": (r"\"transactionStartTimestampMs\":(-?\d+)", 1),
    "txn client transaction version (JSON)": (r"\"clientTransactionVersion\":(\d+)", 1),
    "snapshot producer epoch": (r"(?m)^producerId: \d+ producerEpoch: (\d+) coordinatorEpoch", 1),
    "snapshot coordinator epoch": (r"(?m)^producerId: .* coordinatorEpoch: (-?\d+) currentTxn", 1),
    "snapshot open transaction": (r"currentTxnFirstOffset: (?:Some\(|OptionalLong\[)(\d+)", 1),
    "snapshot last sequence": (r"(?m)^producerId: .* lastSequence: (\d+) lastOffset", 1),
    "snapshot last offset": (r"(?m)^producerId: .* lastOffset: (\d+) offsetDelta", 1),
    "snapshot last timestamp": (r"(?m)^producerId: .* lastTimestamp: (\d+)", 1),
    "txnindex producer id": (r"(?m)^version: 0 producerId: (\d+)", 1),
    "txnindex first offset": (r"(?m)^version: 0 .* firstOffset: (\d+)", 1),
    "txnindex last stable offset": (r"(?m)^version: 0 .* lastStableOffset: (\d+)", 1),
}


#: mutations the parser itself reports (a count that differs from the record lines printed)
_CAUGHT_BY_PARSER = {"batch count"}
#: mutations of record contents, which only a data partition's text prints as they are
_DATA_PARTITIONS_ONLY = {"record payload"}


def _mutated(text: str, pattern: str, change: object) -> str | None:
    m = re.search(pattern, text)
    if m is None:
        return None
    old = m.group(1)
    if isinstance(change, int):
        new = str(int(old) + change)
    elif isinstance(change, dict):
        new = change[old]
    else:
        new = old + str(change)
    return text[: m.start(1)] + new + text[m.end(1) :]


def _mutation_cases() -> list[tuple[str, str, RealDump]]:
    """(mutation, release, the first real text of the release the mutation applies to)."""
    out = []
    for name, (pattern, _) in MUTATIONS.items():
        for version in sorted({d.version for d in DUMPS}):
            dump = next((d for d in DUMPS if d.version == version and re.search(pattern, d.text.read_text())
                         and not (name in _DATA_PARTITIONS_ONLY and d.text.name.startswith("__"))), None)
            if dump is not None:
                out.append((name, version, dump))
    return out


MUTATION_CASES = _mutation_cases()


@needs_dumps
def test_every_mutation_applies_somewhere() -> None:
    assert sorted({name for name, _, _ in MUTATION_CASES}) == sorted(MUTATIONS)


@pytest.mark.parametrize(("name", "version", "dump"), MUTATION_CASES,
                         ids=[f"{n}-{v}" for n, v, _ in MUTATION_CASES])
def test_a_changed_value_is_caught(name: str, version: str, dump: RealDump, tmp_path: Path) -> None:
    pattern, change = MUTATIONS[name]
    changed = _mutated(dump.text.read_text(), pattern, change)
    assert changed is not None
    text = tmp_path / dump.text.name
    text.write_text(changed)
    issues = parse_dump_log(text).issues
    if name in _CAUGHT_BY_PARSER:
        assert issues != []
    else:
        assert issues == []  # still a well-formed dump: the comparison must catch it
    with pytest.raises(AssertionError):
        check_text_equals_binary(dump, text)
