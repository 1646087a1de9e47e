from __future__ import annotations

import pytest

from txn_audit.errors import UsageError
from txn_audit.timeparse import parse_duration_ms, parse_time_ms


@pytest.mark.parametrize(("text", "ms"), [("90s", 90_000), ("1m", 60_000), ("15m", 900_000), ("500ms", 500),
                                          ("2h", 7_200_000), ("1.5s", 1_500), ("1d", 86_400_000)])
def test_durations(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["15", "m", "-1s", "1 week", ""])
def test_bad_durations(text: str) -> None:
    with pytest.raises(UsageError, match="duration"):
        parse_duration_ms(text)


def test_times() -> None:
    assert parse_time_ms("1795377686713") == 1795377686713
    assert parse_time_ms("2026-11-22T20:01:26.713Z") == 1795377686713
    assert parse_time_ms("2026-11-22T20:01:26.713+00:00") == 1795377686713
    assert parse_time_ms("2026-11-22T21:01:26.713+01:00") == 1795377686713
    assert parse_time_ms("2026-11-22 20:01:26.713") == 1795377686713
    with pytest.raises(UsageError, match="ISO-8601"):
        parse_time_ms("yesterday")


def test_epoch_seconds_are_refused_not_read_as_milliseconds() -> None:
    """``date +%s`` prints seconds: read as milliseconds they would put the audit in January 1970."""
    with pytest.raises(UsageError, match=r"looks like epoch seconds.*1795377686000"):
        parse_time_ms("1795377686")
    with pytest.raises(UsageError, match="13 digits"):
        parse_time_ms("17953776867130")


def test_now_is_this_machines_clock() -> None:
    import time

    before = int(time.time() * 1000)
    got = parse_time_ms(" NOW ")
    assert before <= got <= int(time.time() * 1000)
