"""Parsing of the times and durations users type on the command line."""

from __future__ import annotations

import re
import time
from datetime import UTC, date, datetime

from txn_audit.errors import UsageError

_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h|d)\s*$")


def parse_duration_ms(text: str) -> int:
    """``90s``, ``1m``, ``15m``, ``500ms``, ``2h``, ``1.5s`` → milliseconds. A unit is required."""
    match = _DURATION.match(text)
    if not match:
        raise UsageError(f"invalid duration {text!r}: use a number and a unit, e.g. 500ms, 90s, 15m, 2h, 1d")
    return int(round(float(match.group(1)) * _UNITS_MS[match.group(2)]))


def parse_time_ms(text: str) -> int:
    """Epoch milliseconds (13 digits, as Kafka's tools print them), ISO-8601
    (``2026-11-22T20:01:26Z``; no zone means UTC) or ``now`` (this machine's clock). Epoch
    seconds (10 digits, as ``date +%s`` prints them) are refused, not read as milliseconds."""
    stripped = text.strip()
    if stripped.lower() == "now":
        return int(time.time() * 1000)
    if re.fullmatch(r"\d+", stripped):
        if len(stripped) in (12, 13):
            return int(stripped)
        if len(stripped) in (9, 10, 11):
            raise UsageError(f"time {text!r} looks like epoch seconds (as date +%s prints them); give epoch "
                             f"milliseconds ({stripped}000), ISO-8601 (2026-11-22T20:01:26Z) or now")
        raise UsageError(f"invalid time {text!r}: epoch milliseconds have 13 digits (1795377686713); "
                         "or use ISO-8601 (2026-11-22T20:01:26Z) or now")
    try:
        parsed = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}: use ISO-8601 (2026-11-22T20:01:26Z), epoch milliseconds (1795377686713) or now"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(round(parsed.timestamp() * 1000))


def format_time_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def parse_date(text: str | None, option: str = "--audit-date") -> date:
    """``YYYY-MM-DD`` → that date; ``None`` → today (UTC)."""
    if text is None:
        return datetime.now(UTC).date()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
            return date.fromisoformat(text)
    except ValueError:
        pass
    raise UsageError(f"{option} must be a date as YYYY-MM-DD, got {text!r}")
