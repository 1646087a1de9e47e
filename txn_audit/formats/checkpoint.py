"""Small text files of a broker's log dirs: offset checkpoints, properties, partition metadata.

* Offset checkpoints (``replication-offset-checkpoint`` = high watermarks,
  ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
  ``cleaner-offset-checkpoint``): line 1 the version ``0``, line 2 the entry count N, then N
  lines ``<topic> <partition> <offset>`` (split on runs of whitespace). A 0-byte file, or one
  with only the version line, means "no entries" (Kafka reads it that way).
* ``leader-epoch-checkpoint`` (per partition): the same header, then ``<epoch> <startOffset>``.
* ``meta.properties``: Java properties (``#``/``!`` comments, ``key=value`` / ``key: value`` /
  ``key value``, backslash escapes and line continuations).
* ``partition.metadata``: ``version: 0`` and ``topic_id: <22-char url-safe base64 UUID>``.

Lines end at ``\\n``, ``\\r`` or ``\\r\\n`` as with Java's ``BufferedReader.readLine``. Numbers
follow ``Integer.parseInt``/``Long.parseLong`` (ASCII digits, optional sign), not Python's more
lenient ``int()``. Every parse error raises ``CorruptInputError`` kind ``bad_checkpoint`` whose
position is the byte offset of the offending line and whose detail names the line number.

Kafka sources: ``CheckpointFile.java`` (``CheckpointReadBuffer``), ``OffsetCheckpointFile.java``,
``LeaderEpochCheckpointFile.java``, ``PartitionMetadataFile.java``,
``PartitionMetadataReadBuffer.java``, ``MetaProperties.java``/``PropertiesUtils.java``, and
``java.util.Properties.load``. See kafka-formats.md section 1.1.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final, TypeVar

from txn_audit.errors import CorruptInputError
from txn_audit.formats.model import IssueKind, OffsetCheckpoint
from txn_audit.formats.primitives import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

CHECKPOINT_VERSION: Final = 0
PARTITION_METADATA_VERSION: Final = 0

_BAD: Final = IssueKind.BAD_CHECKPOINT.value
_NEWLINE: Final = re.compile(r"\r\n|\r|\n")
_JAVA_WS: Final = re.compile(r"[ \t\n\x0b\f\r]+")  # Java regex \s
_INT: Final = re.compile(r"[+-]?[0-9]+")
_INT32: Final = (INT32_MIN, INT32_MAX)
_INT64: Final = (INT64_MIN, INT64_MAX)
_UUID: Final = re.compile(r"[A-Za-z0-9_-]{22}")

T = TypeVar("T")


class _Line:
    __slots__ = ("number", "position", "text")

    def __init__(self, number: int, position: int, text: str) -> None:
        self.number = number  # 1-based
        self.position = position  # byte offset (UTF-8) of the line start
        self.text = text


def _lines(text: str) -> list[_Line]:
    """Lines as ``BufferedReader.readLine`` returns them: no terminators, no empty last line."""
    out: list[_Line] = []
    start = 0
    byte_pos = 0
    for m in _NEWLINE.finditer(text):
        line = text[start : m.start()]
        out.append(_Line(len(out) + 1, byte_pos, line))
        byte_pos += len(text[start : m.end()].encode("utf-8", "surrogatepass"))
        start = m.end()
    if start < len(text):
        out.append(_Line(len(out) + 1, byte_pos, text[start:]))
    return out


def _error(line: _Line | None, what: str, detail: str, *, end: int = 0) -> CorruptInputError:
    if line is None:
        return CorruptInputError(_BAD, end, f"{what}: {detail}")
    return CorruptInputError(_BAD, line.position, f"{what} line {line.number}: {detail}: {line.text[:80]!r}")


def _java_int(s: str, bounds: tuple[int, int]) -> int | None:
    if not _INT.fullmatch(s):
        return None
    n = int(s)
    return n if bounds[0] <= n <= bounds[1] else None


def _split(line: str) -> list[str]:
    """``Pattern.compile("\\\\s+").split(line)``: leading empty field kept, trailing ones dropped."""
    parts = _JAVA_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


# -- version/count checkpoints ---------------------------------------------------------


def _read_checkpoint(text: str, what: str, parse: Callable[[list[str]], T | None]) -> list[T]:
    lines = _lines(text)
    if not lines:
        return []
    version = _java_int(lines[0].text, _INT32)
    if version is None:
        raise _error(lines[0], what, "malformed version")
    if version != CHECKPOINT_VERSION:
        raise _error(lines[0], what, f"version {version}, expected {CHECKPOINT_VERSION}")
    if len(lines) == 1:
        return []
    expected = _java_int(lines[1].text, _INT32)
    if expected is None:
        raise _error(lines[1], what, "malformed entry count")
    entries: list[T] = []
    for line in lines[2:]:
        entry = parse(_split(line.text))
        if entry is None:
            raise _error(line, what, "malformed entry")
        entries.append(entry)
    if len(entries) != expected:
        last = lines[-1]
        raise _error(
            lines[1], what, f"entry count says {expected} but {len(entries)} entries follow (last line {last.number})"
        )
    return entries


def _offset_entry(parts: list[str]) -> tuple[tuple[str, int], int] | None:
    if len(parts) != 3 or not parts[0]:
        return None
    partition = _java_int(parts[1], _INT32)
    offset = _java_int(parts[2], _INT64)
    if partition is None or offset is None:
        return None
    return (parts[0], partition), offset


def decode_offset_checkpoint(text: str) -> OffsetCheckpoint:
    """Parse one of the four per-log-dir offset checkpoints (see the module docstring).

    A topic-partition listed twice keeps its last offset, as Kafka's map does.
    """
    entries = _read_checkpoint(text, "offset checkpoint", _offset_entry)
    return OffsetCheckpoint(version=CHECKPOINT_VERSION, entries=dict(entries))


def encode_offset_checkpoint(entries: Mapping[tuple[str, int], int]) -> str:
    """Checkpoint text as Kafka writes it (entries in the mapping's order)."""
    body = "".join(f"{topic} {partition} {offset}\n" for (topic, partition), offset in entries.items())
    return f"{CHECKPOINT_VERSION}\n{len(entries)}\n{body}"


def _epoch_entry(parts: list[str]) -> tuple[int, int] | None:
    if len(parts) != 2:
        return None
    epoch = _java_int(parts[0], _INT32)
    offset = _java_int(parts[1], _INT64)
    if epoch is None or offset is None:
        return None
    return epoch, offset


def decode_leader_epoch_checkpoint(text: str) -> list[tuple[int, int]]:
    """``leader-epoch-checkpoint``: ``(leader_epoch, start_offset)`` pairs in file order."""
    return _read_checkpoint(text, "leader-epoch checkpoint", _epoch_entry)


def encode_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    items = list(entries)
    body = "".join(f"{epoch} {offset}\n" for epoch, offset in items)
    return f"{CHECKPOINT_VERSION}\n{len(items)}\n{body}"


# -- partition.metadata ----------------------------------------------------------------


def decode_partition_metadata(text: str) -> dict[str, str]:
    """``partition.metadata`` as ``{"version": "0", "topic_id": "..."}``.

    Like ``PartitionMetadataReadBuffer``: line 1 holds the version (an int >= 0; newer ones are
    accepted for downgrade compatibility), line 2 the topic id, which must be a 22-character
    url-safe base64 UUID other than the all-zero one. Extra ``key: value`` lines are kept.
    """
    lines = _lines(text)
    what = "partition.metadata"
    out: dict[str, str] = {}
    for line in lines:
        if not line.text.strip():
            continue
        key, sep, value = line.text.partition(":")
        if not sep:
            raise _error(line, what, "expected 'key: value'")
        out[key.strip()] = value.strip()
    first = next((ln for ln in lines if ln.text.strip()), None)
    version = out.get("version")
    if version is None or _java_int(version, _INT32) is None:
        raise _error(first, what, "missing or malformed version", end=len(text.encode("utf-8", "surrogatepass")))
    if int(version) < PARTITION_METADATA_VERSION:
        raise _error(first, what, f"version {version}")
    topic_id = out.get("topic_id")
    if topic_id is None:
        raise _error(None, what, "no topic_id line", end=len(text.encode("utf-8", "surrogatepass")))
    raw = _uuid_bytes(topic_id)
    if raw is None or raw == bytes(16):
        where = next((ln for ln in lines if ln.text.split(":", 1)[0].strip() == "topic_id"), None)
        raise _error(where, what, "topic_id is not a valid non-zero UUID")
    return out


def _uuid_bytes(s: str) -> bytes | None:
    if not _UUID.fullmatch(s):
        return None
    try:
        raw = base64.urlsafe_b64decode(s + "==")
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 16 else None


def encode_partition_metadata(topic_id: str, version: int = PARTITION_METADATA_VERSION) -> str:
    return f"version: {version}\ntopic_id: {topic_id}\n"


# -- Java properties -------------------------------------------------------------------

_PROP_WS: Final = " \t\f"


def _logical_lines(text: str) -> list[tuple[_Line, str]]:
    """``Properties.LineReader``: joins backslash-continued lines, drops comments and blanks."""
    out: list[tuple[_Line, str]] = []
    lines = _lines(text)
    i = 0
    while i < len(lines):
        first = lines[i]
        cur = first.text.lstrip(_PROP_WS)
        i += 1
        if not cur or cur[0] in "#!":
            continue
        while _odd_trailing_backslashes(cur):
            cur = cur[:-1]
            if i >= len(lines):
                break
            cur += lines[i].text.lstrip(_PROP_WS)
            i += 1
        out.append((first, cur))
    return out


def _odd_trailing_backslashes(s: str) -> bool:
    n = len(s) - len(s.rstrip("\\"))
    return n % 2 == 1


def _unescape(s: str, line: _Line) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        i += 1
        if c != "\\" or i >= len(s):
            out.append(c)
            continue
        c = s[i]
        i += 1
        if c == "u":
            hexa = s[i : i + 4]
            if len(hexa) != 4 or not all(h in "0123456789abcdefABCDEF" for h in hexa):
                raise _error(line, "properties", "malformed \\uxxxx escape")
            out.append(chr(int(hexa, 16)))
            i += 4
        else:
            out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
    joined = "".join(out)
    # \uD83D\uDE00 pairs from the escapes become one character, as Java's UTF-16 string holds them
    return joined.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def decode_properties(text: str) -> dict[str, str]:
    """Java properties (``meta.properties``) as a dict; later duplicates win, as in Java."""
    out: dict[str, str] = {}
    for line, logical in _logical_lines(text):
        key_end = len(logical)
        value_start = len(logical)
        has_sep = False
        backslash = False
        for j, c in enumerate(logical):
            if not backslash and c in "=:":
                key_end, value_start, has_sep = j, j + 1, True
                break
            if not backslash and c in _PROP_WS:
                key_end, value_start = j, j + 1
                break
            backslash = (not backslash) if c == "\\" else False
        while value_start < len(logical):
            c = logical[value_start]
            if c not in _PROP_WS:
                if not has_sep and c in "=:":
                    has_sep = True
                else:
                    break
            value_start += 1
        out[_unescape(logical[:key_end], line)] = _unescape(logical[value_start:], line)
    return out


def _escape(s: str, *, is_key: bool) -> str:
    out: list[str] = []
    for i, c in enumerate(s):
        if c == " ":
            out.append("\\ " if is_key or i == 0 else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "\\=:#!":
            out.append("\\" + c)
        elif " " < c <= "~":
            out.append(c)
        else:
            units = c.encode("utf-16-be", "surrogatepass")
            out.extend(f"\\u{units[k] << 8 | units[k + 1]:04X}" for k in range(0, len(units), 2))
    return "".join(out)


def encode_properties(props: Mapping[str, str], *, comment: str | None = None) -> str:
    """Properties text as ``Properties.store`` escapes it (ASCII only, ``key=value`` lines)."""
    head = "" if comment is None else "".join(f"#{c}\n" for c in comment.splitlines() or [""])
    return head + "".join(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n" for k, v in props.items())
