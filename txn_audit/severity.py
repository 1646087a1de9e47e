"""The severity of a finding: one ordered vocabulary, info < warning < critical.

Every layer that speaks of findings (detect, quality, api, cli, explore, report, the nightly
job) takes it from here. Pure Python, no third-party imports: it sits at the bottom of the
layering beside ``txn_audit.errors``.

``decode_issues`` rows have a vocabulary of their own (info | warning | error, see
``txn_audit.formats.model.Severity``): how bad a byte range is to decode, not how bad a
finding is; the ``corrupt_batch`` / ``truncated_segment`` / ``unreadable_input`` rules map one
onto the other.
"""

from __future__ import annotations

from enum import StrEnum

from txn_audit.errors import UsageError

__all__ = ["MOST_SEVERE_FIRST", "SEVERITIES", "Severity"]


class Severity(StrEnum):
    """A finding's severity. Compares by rank (``Severity.INFO < Severity.CRITICAL``), not
    alphabetically; its value is the string stored in the ``findings`` table and the JSON."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for info, 1 for warning, 2 for critical."""
        return _RANK[self]

    @classmethod
    def parse(cls, text: str, option: str = "--min-severity") -> Severity:
        """``text`` as a severity, or a ``UsageError`` naming ``option`` and the choices."""
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(s.value for s in cls)
            raise UsageError(f"{option} must be one of {choices}, got {text!r}") from None

    def __lt__(self, other: str) -> bool:
        return self.rank < Severity(other).rank

    def __le__(self, other: str) -> bool:
        return self.rank <= Severity(other).rank

    def __gt__(self, other: str) -> bool:
        return self.rank > Severity(other).rank

    def __ge__(self, other: str) -> bool:
        return self.rank >= Severity(other).rank


_RANK: dict[str, int] = {s.value: i for i, s in enumerate(Severity)}  # the order of the definition

#: every severity, least severe first
SEVERITIES: tuple[Severity, ...] = tuple(Severity)

#: every severity, most severe first: the order in which every output lists them (critical,
#: warning, info)
MOST_SEVERE_FIRST: tuple[Severity, ...] = tuple(reversed(SEVERITIES))
