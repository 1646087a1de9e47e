"""A mapping whose values are computed the first time a test asks for them, then kept.

The corpus tests' fixtures hand one to their tests instead of scanning every scenario up front:
``pytest -k 4.4.0/healthy`` scans that scenario alone, and a scenario asked for by several tests
is scanned once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

__all__ = ["OnDemand"]

V = TypeVar("V")


class OnDemand(Mapping[str, V]):
    """``keys`` known up front; ``compute(key)`` run on the first lookup of each."""

    def __init__(self, keys: Iterable[str], compute: Callable[[str], V]) -> None:
        self._keys = list(keys)
        self._compute = compute
        self._done: dict[str, V] = {}

    def __getitem__(self, key: str) -> V:
        if key not in self._done:
            if key not in self._keys:
                raise KeyError(key)
            self._done[key] = self._compute(key)
        return self._done[key]

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def computed(self) -> list[str]:
        """The keys computed so far, in the order they were asked for."""
        return list(self._done)
