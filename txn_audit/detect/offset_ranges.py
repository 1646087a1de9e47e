"""Offset ranges: which offsets of a range no batch or segment holds (pure Python, few rows)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["uncovered"]


def uncovered(held: Iterable[tuple[int, int]], first: int, last: int) -> list[tuple[int, int]]:
    """The ranges of offsets from ``first`` to ``last`` (inclusive) that none of ``held`` (first,
    last offsets, inclusive, in any order, overlapping or not) holds, in order; none when
    ``first > last``."""
    missing, at = [], first
    for start, end in sorted(held):
        if at > last:
            break
        if start > at:
            missing.append((at, min(start - 1, last)))
        at = max(at, end + 1)
    if at <= last:
        missing.append((at, last))
    return missing
