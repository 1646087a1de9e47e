"""Partition offsets reported by a live cluster, attached to a text dump: the high watermark a
text dump cannot carry (``kafka-dump-log`` prints no checkpoint files).

Two forms are read:

* ``kafka-get-offsets.sh --time -1`` output (GetOffsetShell): one ``topic:partition:offset``
  line per partition. Its admin client lists offsets with the default ``read_uncommitted``
  isolation, so the latest offset it prints is the high watermark.
* a JSON file (``offsets.json``): an object keyed by partition name, or a list, of objects with
  ``topic``, ``partition`` and ``high_watermark``, and optionally ``last_stable_offset`` and
  ``log_start_offset`` (what kafka-python's ``end_offsets`` under both isolation levels and
  ``beginning_offsets`` give).

Entries that do not parse become ``TextIssue`` values with their line numbers (the JSON form's
issues carry line 1, or the line of a syntax error).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from txn_audit.formats.dumplog_text import TextIssue, excerpt
from txn_audit.formats.model import IssueKind, Severity

_GET_OFFSETS_LINE: Final = re.compile(r"^(?P<topic>[^\s:]+):(?P<partition>\d+):(?P<offset>-?\d+)$")


@dataclass(frozen=True, slots=True)
class ReportedOffsets:
    """One partition's offsets as the cluster reported them."""

    topic: str
    partition: int
    high_watermark: int
    last_stable_offset: int | None = None
    log_start_offset: int | None = None


def looks_like_get_offsets(lines: list[str]) -> bool:
    """True when every non-blank, non-comment line is ``topic:partition:offset``."""
    body = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return bool(body) and all(_GET_OFFSETS_LINE.match(line) for line in body)


def looks_like_offsets_json(head: str) -> bool:
    """True for the head of a JSON document that names high watermarks."""
    stripped = head.lstrip()
    return stripped[:1] in ("{", "[") and '"high_watermark"' in stripped


def parse_get_offsets(text: str) -> tuple[list[ReportedOffsets], list[TextIssue]]:
    entries: list[ReportedOffsets] = []
    issues: list[TextIssue] = []
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _GET_OFFSETS_LINE.match(line)
        if m is None:
            issues.append(_issue(n, "not a topic:partition:offset line", line))
            continue
        offset = int(m["offset"])
        if offset < 0:
            issues.append(_issue(n, "negative offset: the partition had no leader when the tool ran", line))
            continue
        entries.append(ReportedOffsets(m["topic"], int(m["partition"]), offset))
    return entries, issues


def parse_offsets_json(text: str) -> tuple[list[ReportedOffsets], list[TextIssue]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        return [], [_issue(err.lineno, f"not valid JSON ({err.msg})", text.split("\n")[err.lineno - 1])]
    items: list[tuple[str | None, Any]]
    if isinstance(doc, dict):
        items = list(doc.items())
    elif isinstance(doc, list):
        items = [(None, item) for item in doc]
    else:
        return [], [_issue(1, "expected an object or a list of partition offsets", text)]
    entries: list[ReportedOffsets] = []
    issues: list[TextIssue] = []
    for name, item in items:
        entry = _json_entry(name, item)
        if entry is None:
            issues.append(_issue(1, "entry without topic, partition and a non-negative high_watermark",
                                 json.dumps({name: item} if name is not None else item)))
        else:
            entries.append(entry)
    return entries, issues


def _json_entry(name: str | None, item: Any) -> ReportedOffsets | None:
    if not isinstance(item, dict):
        return None
    topic, partition = item.get("topic"), item.get("partition")
    if (topic is None or partition is None) and name is not None and (m := re.match(r"(.+)-(\d+)$", name)):
        topic, partition = topic or m[1], partition if partition is not None else int(m[2])
    high_watermark = item.get("high_watermark")
    optional = [item.get(k) for k in ("last_stable_offset", "log_start_offset")]
    if not isinstance(topic, str) or not _is_int(partition) or not _is_int(high_watermark) or high_watermark < 0:
        return None
    lso, log_start = (v if _is_int(v) and v >= 0 else None for v in optional)
    return ReportedOffsets(topic, int(partition), int(high_watermark), lso, log_start)


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _issue(line: int, reason: str, text: str) -> TextIssue:
    return TextIssue(None, line, IssueKind.UNPARSED_LINE.value, Severity.WARNING.value, reason, excerpt(text))
