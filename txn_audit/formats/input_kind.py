"""What a file is, from its first bytes: a ``kafka-dump-log`` text dump, one of the
``kafka-transactions.sh`` tables, partition offsets (``kafka-get-offsets.sh`` output or an
offsets JSON file), a binary Kafka file, other text, or nothing.

Only the head of the file is read (``SNIFF_BYTES``). A JSON document naming high watermarks is
an offsets file; text whose every line is ``topic:partition:offset`` is get-offsets output.
Otherwise comment lines (``#``) and blank lines are skipped; the first other line decides:
``Dumping <path>`` is a dump-log dump, a ``TransactionsCommand`` header names its table. Bytes that
are not UTF-8 text (or hold NUL bytes) are binary; a binary file named like a segment-family file
says which one it is. A dump-log dump with NUL bytes in its head (zero-filled by a damaged copy)
stays a dump-log dump: its decoder reports the lines it cannot read, rather than the whole file
going unread as binary.
"""

from __future__ import annotations

import os
from typing import Final

from txn_audit.formats.layout import parse_log_file_name
from txn_audit.formats.offsets_text import looks_like_get_offsets, looks_like_offsets_json
from txn_audit.formats.transactions_text import kind_of_header

SNIFF_BYTES: Final = 64 * 1024

DUMP_LOG: Final = "dump_log"
TRANSACTIONS_PREFIX: Final = "kafka_transactions_"  # + list | describe | describe_producers | find_hanging
OFFSETS_JSON: Final = "offsets_json"  # partition offsets (high watermarks) as JSON
GET_OFFSETS: Final = "kafka_get_offsets"  # kafka-get-offsets.sh output: topic:partition:offset lines
BINARY: Final = "binary"  # + "_" + log | index | timeindex | txnindex | snapshot | checkpoint when the name says
TEXT: Final = "text"
EMPTY: Final = "empty"


def sniff_bytes(head: bytes, name: str = "") -> str:
    """The kind of a file whose first bytes are ``head`` (``name`` is its file name, if known)."""
    if not head:
        return EMPTY
    text: str | None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as err:
        # a multi-byte character cut at the end of the head is still text
        cut = len(head) >= SNIFF_BYTES and err.reason == "unexpected end of data"
        text = head[: err.start].decode("utf-8") if cut else None
    if text is not None and "\x00" in text and _first_line(text.replace("\x00", "").split("\n")).startswith(
            "Dumping "):
        return DUMP_LOG
    if text is None or "\x00" in text:
        parsed = parse_log_file_name(name) if name else None
        return f"{BINARY}_{parsed.kind}" if parsed is not None else BINARY
    if looks_like_offsets_json(text):
        return OFFSETS_JSON
    lines = text.split("\n")
    if len(head) >= SNIFF_BYTES and len(lines) > 1:
        lines = lines[:-1]  # the last line may be cut
    if looks_like_get_offsets(lines):
        return GET_OFFSETS
    line = _first_line(lines)
    if line.startswith("Dumping "):
        return DUMP_LOG
    table = kind_of_header(line) if line else None
    if table is not None:
        return TRANSACTIONS_PREFIX + table.replace("-", "_")
    return TEXT


def _first_line(lines: list[str]) -> str:
    """The first line that is neither blank nor a comment (``#``); empty when there is none."""
    for line in lines:
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return line
    return ""


def sniff_file(path: str | os.PathLike[str]) -> str:
    """The kind of the file at ``path`` (reads at most ``SNIFF_BYTES``)."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    return sniff_bytes(head, os.path.basename(os.fspath(path)))


def is_text_dump(kind: str) -> bool:
    """Whether a sniffed kind is a tool's text output that txn-audit reads."""
    return kind in (DUMP_LOG, OFFSETS_JSON, GET_OFFSETS) or kind.startswith(TRANSACTIONS_PREFIX)
