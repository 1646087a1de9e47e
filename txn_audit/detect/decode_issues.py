"""``corrupt_batch``, ``truncated_segment`` and ``unreadable_input`` findings from the
``decode_issues`` table, computed on the driver with pyarrow (no pyspark here).

The rule's rows are few: the issues (a handful per damaged file), the inventory's text files,
and the batches of the damaged files alone, which a scan reads from the raw tables' files with a
filter on ``file`` that Parquet answers from its row groups' statistics (a row group holds one
segment's batches; ``detect.decode_issue_inputs``). A Spark query over the same tables plans six
shuffles and four broadcasts, and runs nine jobs, for those few rows.

An issue of a binary file is placed on the batch at its byte position; one of a text file (a
``kafka-dump-log`` dump, a ``kafka-transactions.sh`` table, an offsets file) names its line in
its detail and is placed on no batch.
"""

from __future__ import annotations

from collections.abc import Collection

import pyarrow as pa
import pyarrow.compute as pc

from txn_audit.formats import input_kind
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.severity import Severity

__all__ = ["BATCH_COLUMNS", "CORRUPTION_ISSUES", "SEGMENT_COLUMNS", "TRUNCATION_ISSUES", "decode_issue_findings",
           "text_files"]

#: issue kinds of a batch whose bytes are damaged: a ``corrupt_batch`` on the batch at its position
CORRUPTION_ISSUES = (
    "crc_mismatch", "bad_length", "bad_magic", "corrupt_record", "decompression_error", "offset_order",
    "unexpected_control",
)
#: issue kinds of a segment whose end is cut short: a ``truncated_segment`` after its last batch
TRUNCATION_ISSUES = ("truncated_tail", "zero_filled_tail")
#: the columns of ``batches`` the rule reads
BATCH_COLUMNS = ("file", "position", "base_offset", "last_offset", "max_timestamp")
#: the columns of ``segments`` the rule reads
SEGMENT_COLUMNS = ("path", "kind")
#: what a torn tail's finding adds to the issue's detail
TORN_TAIL_NOTE = " (a torn tail is how a crashed broker's active segment ends; the broker truncates it on recovery)"
#: how a finding names the dump's top folder (an issue's ``file`` ".")
TOP_FOLDER = "the dump's top folder"


def text_files(segments: pa.Table) -> set[str]:
    """The files of the ``segments`` inventory (``SEGMENT_COLUMNS`` at least) that are a Kafka
    tool's text output: their issues' positions are line numbers, not byte offsets."""
    kind = segments.column("kind")
    text = pc.or_(pc.is_in(kind, pa.array([input_kind.DUMP_LOG, input_kind.OFFSETS_JSON, input_kind.GET_OFFSETS])),
                  pc.starts_with(kind, input_kind.TRANSACTIONS_PREFIX))
    return set(segments.column("path").filter(pc.fill_null(text, False)).to_pylist())


def _severity(kind: str, issue_severity: str) -> Severity:
    if kind in CORRUPTION_ISSUES:
        return Severity.CRITICAL
    if kind in TRUNCATION_ISSUES:
        return Severity.INFO if kind == "zero_filled_tail" else Severity.WARNING
    # the decode issue's own severity (info | warning | error) decides the finding's
    return Severity.INFO if issue_severity == "info" else Severity.WARNING


def _finding_kind(kind: str) -> str:
    if kind in CORRUPTION_ISSUES:
        return "corrupt_batch"
    return "truncated_segment" if kind in TRUNCATION_ISSUES else "unreadable_input"


def decode_issue_findings(issues: pa.Table, batches: pa.Table, texts: Collection[str]) -> pa.Table:
    """One ``FINDINGS`` row per row of ``issues`` (``decode_issues``). ``batches``: the
    ``BATCH_COLUMNS`` of at least every batch of the issues' files; ``texts``: the text files
    (``text_files``). A corrupt batch's finding takes the offsets and time of the batch at its
    position, a torn tail's the offset after its file's last batch."""
    ends = batches.group_by("file").aggregate([("last_offset", "max")])
    end_of = dict(zip(ends.column("file").to_pylist(), ends.column("last_offset_max").to_pylist(), strict=True))
    # the batches at the issues' positions: few rows turned into Python objects, whatever the files hold
    positions = pa.array(sorted({p for p in issues.column("position").to_pylist() if p is not None}), pa.int64())
    placed = batches.filter(pc.is_in(batches.column("position"), value_set=positions))
    at = {(row["file"], row["position"]): row for row in placed.to_pylist()}
    rows = []
    for issue in issues.to_pylist():
        kind, file, position, detail = issue["kind"], issue["file"], issue["position"], issue["detail"]
        line = file in texts
        named = TOP_FOLDER if file == "." else file
        where = named if position is None or line else f"{named} at byte {position}"
        corrupt, torn = kind in CORRUPTION_ISSUES, kind in TRUNCATION_ISSUES
        batch = at.get((file, position)) if corrupt and not line and position is not None else None
        end = end_of.get(file) if torn else None
        rows.append({
            "kind": _finding_kind(kind),
            "severity": _severity(kind, issue["severity"]).value,
            "topic": issue["topic"], "partition": issue["partition"], "broker_id": issue["broker_id"],
            "first_offset": batch["base_offset"] if batch else (None if end is None else end + 1),
            "last_offset": batch["last_offset"] if batch else None,
            "first_timestamp": batch["max_timestamp"] if batch else None,
            "evidence": f"{where}: {detail}{TORN_TAIL_NOTE}" if torn else f"{where}: {kind}: {detail}",
            "file": file,
        })
    return pa.Table.from_pylist(rows, schema=in_ms(FINDINGS))
