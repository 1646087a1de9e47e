"""The decode-issue rule on the driver (``detect.decode_issues``), on tables made here: each issue
kind's finding, its severity and place, whatever the batches read hold (none at all included).
The sample's damage and the frames-versus-files agreement are in ``test_scan_modes.py``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from txn_audit.detect.decode_issues import BATCH_COLUMNS, decode_issue_findings, text_files
from txn_audit.schemas import BATCHES, DECODE_ISSUES, FINDINGS, SEGMENTS, in_ms

LOG = "broker-1/orders-0/00000000000000000000.log"


def issue(kind: str, position: int | None, *, file: str = LOG, severity: str = "error",
          detail: str = "what went wrong") -> dict[str, Any]:
    return {"broker_id": 1, "log_dir": "broker-1", "topic": "orders", "partition": 0, "file": file,
            "position": position, "kind": kind, "severity": severity, "detail": detail}


def batch(position: int, base: int, last: int, *, file: str = LOG) -> dict[str, Any]:
    return {"file": file, "position": position, "base_offset": base, "last_offset": last, "max_timestamp": 1000 + base}


def findings(issues: list[dict[str, Any]], batches: list[dict[str, Any]],
             texts: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    batch_schema = pa.schema([in_ms(BATCHES).field(name) for name in BATCH_COLUMNS])  # as read: epoch ms
    table = decode_issue_findings(pa.Table.from_pylist(issues, schema=DECODE_ISSUES),
                                  pa.Table.from_pylist(batches, schema=batch_schema), texts)
    assert table.schema == in_ms(FINDINGS)  # epoch ms until written
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def test_each_issue_kind_gives_its_finding_on_its_batch() -> None:
    batches = [batch(0, 0, 4), batch(120, 5, 9), batch(260, 10, 10)]
    found = findings([issue("crc_mismatch", 120), issue("truncated_tail", 300), issue("zero_filled_tail", 400),
                      issue("unrecognised_file", None, severity="info")], batches)
    corrupt, torn, zeros, unknown = found
    assert (corrupt["kind"], corrupt["severity"]) == ("corrupt_batch", "critical")
    assert (corrupt["first_offset"], corrupt["last_offset"], corrupt["first_timestamp"]) == (5, 9, 1005)
    assert corrupt["evidence"] == f"{LOG} at byte 120: crc_mismatch: what went wrong"
    assert (corrupt["topic"], corrupt["partition"], corrupt["broker_id"], corrupt["file"]) == ("orders", 0, 1, LOG)
    assert (torn["kind"], torn["severity"], torn["first_offset"], torn["last_offset"]) == (
        "truncated_segment", "warning", 11, None)
    assert torn["evidence"].startswith(f"{LOG} at byte 300: what went wrong (a torn tail is how")
    assert (zeros["severity"], zeros["first_offset"]) == ("info", 11)
    assert (unknown["kind"], unknown["severity"], unknown["evidence"]) == (
        "unreadable_input", "info", f"{LOG}: unrecognised_file: what went wrong")


def test_without_batches_nothing_is_placed() -> None:
    """A corrupt batch at a byte no batch starts at, or a file of which no batch was read, gives a
    finding without offsets; the dump's top folder is named as such."""
    found = findings([issue("bad_length", 77), issue("truncated_tail", 10), issue("unrecognised_file", None, file=".")],
                     [])
    assert [(f["kind"], f["first_offset"], f["last_offset"]) for f in found] == [
        ("corrupt_batch", None, None), ("truncated_segment", None, None), ("unreadable_input", None, None)]
    assert found[2]["evidence"] == "the dump's top folder: unrecognised_file: what went wrong"
    assert findings([], []) == []


def test_a_text_files_positions_are_lines() -> None:
    """In a text dump an issue's position is a line number: no byte is named and no batch taken,
    even one the dump printed at that position; the inventory says which files are text."""
    dump = "dumps/orders.txt"
    segments = pa.Table.from_pylist([
        {"broker_id": None, "log_dir": ".", "topic": None, "partition": None, "path": dump, "file_name": "orders.txt",
         "kind": "dump_log", "base_offset": None, "size_bytes": 100, "status": "live", "replica_status": None,
         "decoded": True, "skip_reason": None},
        {"broker_id": 1, "log_dir": "broker-1", "topic": "orders", "partition": 0, "path": LOG,
         "file_name": "00000000000000000000.log", "kind": "log", "base_offset": 0, "size_bytes": 100,
         "status": "live", "replica_status": "live", "decoded": True, "skip_reason": None},
    ], schema=SEGMENTS)
    texts = text_files(segments)
    assert texts == {dump}
    (corrupt,) = findings([issue("crc_mismatch", 8, file=dump, detail="line 8: CRC no longer valid")],
                          [batch(8, 0, 3, file=dump)], frozenset(texts))
    assert corrupt["evidence"] == f"{dump}: crc_mismatch: line 8: CRC no longer valid"
    assert corrupt["first_offset"] is None
