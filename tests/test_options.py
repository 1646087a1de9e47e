"""The audit's options: one object, every default once (``usage.AuditOptions``)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from txn_audit import cli
from txn_audit.errors import UsageError
from txn_audit.timeparse import parse_duration_ms
from txn_audit.usage import DEFAULTS, AuditOptions, default_text

ROOT = Path(__file__).resolve().parent.parent


def test_the_command_lines_defaults_are_the_options_defaults() -> None:
    parameters = inspect.signature(cli.scan_command).parameters
    assert parse_duration_ms(parameters["max_transaction_timeout"].default) == DEFAULTS.max_transaction_timeout_ms
    assert parse_duration_ms(parameters["late_tolerance"].default) == DEFAULTS.late_tolerance_ms
    assert (DEFAULTS.max_transaction_timeout_ms, DEFAULTS.late_tolerance_ms) == (15 * 60_000, 1_000)


def test_the_defaults_are_written_once() -> None:
    """No module but ``usage`` writes the default durations as numbers (15 minutes) or defaults a
    tolerance, a grace or a skew."""
    literal = re.compile(r"\b(15 \* 60_000|900_000|900000)\b|(transaction_timeout|tolerance|grace|skew)_ms: int = \d")
    found = [f"{path.relative_to(ROOT)}:{n}" for path in [*(ROOT / "txn_audit").rglob("*.py"),
                                                           *(ROOT / "jobs").rglob("*.py")]
             if path.name != "usage.py"
             for n, line in enumerate(path.read_text().splitlines(), 1) if literal.search(line)]
    assert found == []


@pytest.mark.parametrize(("text", "ms"), [("15m", 900_000), ("1s", 1_000), ("250ms", 250), ("2h", 7_200_000)])
def test_a_default_reads_back_as_itself(text: str, ms: int) -> None:
    assert default_text(ms) == text and parse_duration_ms(text) == ms


def test_from_text_reads_what_a_command_line_gives() -> None:
    options = AuditOptions.from_text("1795377686000", "2m", "500ms", quality=False)
    assert (options.as_of_ms, options.max_transaction_timeout_ms, options.late_tolerance_ms, options.quality) == (
        1_795_377_686_000, 120_000, 500, False)
    assert AuditOptions.from_text() == DEFAULTS


@pytest.mark.parametrize("bad", [{"max_transaction_timeout_ms": 0}, {"late_tolerance_ms": -1},
                                 {"input_kind": "yaml"}, {"prepare_grace_ms": -5}])
def test_options_that_cannot_be_used_are_refused_when_built(bad: dict[str, object]) -> None:
    with pytest.raises(UsageError):
        AuditOptions(**bad)  # type: ignore[arg-type]


def test_the_audit_time_is_set_once_chosen() -> None:
    with pytest.raises(ValueError, match="no audit time"):
        _ = DEFAULTS.audit_ms
    chosen = DEFAULTS.at(1_795_377_686_000)
    assert chosen.audit_ms == 1_795_377_686_000 and chosen.durations() == DEFAULTS.durations()
