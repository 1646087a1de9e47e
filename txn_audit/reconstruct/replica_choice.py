"""Which copy of a partition speaks for it, when a dump holds several (one per broker).

Pure Python over the few rows that describe the copies (``partition_offsets``, the replayed
KRaft metadata, each copy's log end): every live replica gets a rank, 1 for the one whose data
the audit reports, and the chosen one a sentence saying why. Best evidence first:

1. the only copy: nothing to choose;
2. the KRaft metadata log (``__cluster_metadata``): the leader its newest copy names, when that
   broker's copy is in the dump;
3. each copy's ``leader-epoch-checkpoint``: the highest leader epoch (the replica that has heard
   from the newest leader; a follower of an older epoch may hold a tail the leader truncates),
   then the longest log;
4. without either: the highest high watermark (never beyond the copy's own log end), then the
   longest log.

Remaining ties go to the lowest broker id, then log dir, so the choice is deterministic. The
other copies are ranked by the same order after the chosen one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CopyFacts", "Leadership", "RankedReplica", "rank_replicas", "replica_name"]

Key = tuple[str, int]


@dataclass(frozen=True)
class CopyFacts:
    """What the dump says of one live copy of a partition."""

    broker_id: int | None
    log_dir: str
    topic: str
    partition: int
    log_end_offset: int | None  # one past its last batch (or its newest segment's base)
    high_watermark: int | None  # from its checkpoint (or an offsets file)
    leader_epoch: int | None  # newest epoch in its leader-epoch-checkpoint

    @property
    def torn(self) -> bool:
        """Its checkpoint gives a HW beyond its own log end: the copy lost its tail (cut short, or
        a crash before the flush), and says less than the replica did."""
        return (self.high_watermark is not None and self.log_end_offset is not None
                and self.high_watermark > self.log_end_offset)

    @property
    def capped_hw(self) -> int:
        if self.high_watermark is None:
            return -1
        return self.high_watermark if self.log_end_offset is None else min(self.high_watermark, self.log_end_offset)


@dataclass(frozen=True)
class Leadership:
    """A partition's state in the KRaft metadata log."""

    leader: int  # -1: no leader
    leader_epoch: int
    isr: tuple[int, ...]
    record_offset: int


@dataclass(frozen=True)
class RankedReplica:
    copy: CopyFacts
    rank: int  # 1: the one that speaks for the partition
    reason: str  # why the chosen one was chosen (the same sentence on every copy of the partition)
    leadership: Leadership | None


def replica_name(broker_id: int | None, log_dir: str) -> str:
    """How a copy is named to a person: its broker and its log dir in the dump."""
    if broker_id is None:
        return f"log dir {log_dir}"
    return f"broker {broker_id}" if log_dir == "." else f"broker {broker_id} ({log_dir})"


def _name(copy: CopyFacts) -> str:
    return replica_name(copy.broker_id, copy.log_dir)


def _order(copy: CopyFacts) -> tuple[bool, int, int, int, int, str]:
    """Sort key, best first: intact copies before torn ones, then leader epoch, log end, high
    watermark, then lowest broker id."""
    return (
        copy.torn,
        -(copy.leader_epoch if copy.leader_epoch is not None else -1),
        -(copy.log_end_offset if copy.log_end_offset is not None else -1),
        -copy.capped_hw,
        copy.broker_id if copy.broker_id is not None else 1 << 31,
        copy.log_dir,
    )


def _end(copy: CopyFacts) -> str:
    return "no batch" if copy.log_end_offset is None else f"ends at {copy.log_end_offset}"


def _fallback_reason(ordered: Sequence[CopyFacts]) -> str:
    best = ordered[0]
    torn = [c for c in ordered[1:] if c.torn and not best.torn]
    others = [c for c in ordered[1:] if c not in torn]
    note = "".join(f"{_name(c)}'s copy is cut short (its checkpoint says high watermark {c.high_watermark}, its log "
                   f"{_end(c)}); " for c in torn)
    return note + _fallback_choice(best, others)


def _fallback_choice(best: CopyFacts, others: Sequence[CopyFacts]) -> str:
    if not others:
        return "the only intact copy"
    if any(c.leader_epoch is not None for c in (best, *others)):
        if all(best.leader_epoch is not None and (c.leader_epoch is None or c.leader_epoch < best.leader_epoch)
               for c in others):
            rest = "; ".join(f"{_name(c)}: {'none' if c.leader_epoch is None else c.leader_epoch}" for c in others)
            return f"the highest leader epoch in its leader-epoch-checkpoint, {best.leader_epoch} ({rest})"
        same = f"leader epoch {best.leader_epoch} in its leader-epoch-checkpoint, as the others'"
    else:
        same = "no leader-epoch-checkpoint says more"
    tied = [c for c in others if c.leader_epoch == best.leader_epoch]
    if tied and all((c.log_end_offset or -1) < (best.log_end_offset or -1) for c in tied):
        rest = "; ".join(f"{_name(c)} {_end(c)}" for c in tied)
        return f"{same}; the longest log: {_end(best)} ({rest})"
    if tied and all(c.capped_hw < best.capped_hw for c in tied):
        rest = "; ".join(f"{_name(c)}: {c.capped_hw}" for c in tied)
        return f"{same}; the same log end; the highest high watermark, {best.capped_hw} ({rest})"
    return f"{same}; the copies end alike ({_end(best)}): the lowest broker id"


def rank_replicas(copies: Iterable[CopyFacts], leaders: Mapping[Key, Leadership]) -> list[RankedReplica]:
    """Every copy of every partition, ranked within its partition (see the module docstring)."""
    by_partition: dict[Key, list[CopyFacts]] = defaultdict(list)
    for copy in copies:
        by_partition[(copy.topic, copy.partition)].append(copy)
    ranked: list[RankedReplica] = []
    for key in sorted(by_partition):
        group = sorted(by_partition[key], key=_order)
        leadership = leaders.get(key)
        if len(group) == 1:
            ranked.append(RankedReplica(group[0], 1, "the only copy of the partition in the dump", leadership))
            continue
        note = ""
        if leadership is not None:
            named = [c for c in group if c.broker_id == leadership.leader]
            if leadership.leader >= 0 and len(named) == 1 and not (named[0].torn and not group[0].torn):
                leader = named[0]
                group = [leader] + [c for c in group if c is not leader]
                reason = (f"the leader in the KRaft metadata log: broker {leadership.leader} at leader epoch "
                          f"{leadership.leader_epoch} (metadata offset {leadership.record_offset})")
                ranked.extend(RankedReplica(c, i, reason, leadership) for i, c in enumerate(group, 1))
                continue
            note = ("the KRaft metadata log names no leader (partition offline); " if leadership.leader < 0 else
                    f"the KRaft metadata log names broker {leadership.leader} leader, whose copy is not in the "
                    "dump; " if not named else
                    f"the KRaft metadata log names broker {leadership.leader} leader at leader epoch "
                    f"{leadership.leader_epoch}, but ")
        reason = note + _fallback_reason(group)
        ranked.extend(RankedReplica(c, i, reason, leadership) for i, c in enumerate(group, 1))
    return ranked
