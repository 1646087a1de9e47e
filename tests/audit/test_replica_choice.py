"""Which copy of a partition speaks for it (``reconstruct.replica_choice``), evidence by evidence."""

from __future__ import annotations

from txn_audit.reconstruct.replica_choice import CopyFacts, Leadership, RankedReplica, rank_replicas


def copy(broker: int | None, *, end: int | None = 70, hw: int | None = 70, epoch: int | None = 0,
         log_dir: str | None = None) -> CopyFacts:
    return CopyFacts(broker, log_dir or f"broker-{broker}", "t", 0, end, hw, epoch)


def ranks(ranked: list[RankedReplica]) -> list[int | None]:
    """Broker ids in rank order."""
    return [r.copy.broker_id for r in sorted(ranked, key=lambda r: r.rank)]


def test_one_copy_is_the_partition() -> None:
    (only,) = rank_replicas([copy(1)], {})
    assert (only.rank, only.reason) == (1, "the only copy of the partition in the dump")


def test_the_metadata_leader_speaks_whatever_the_checkpoints_say() -> None:
    copies = [copy(1, epoch=9, end=90, hw=90), copy(2, epoch=3), copy(3, epoch=3)]
    ranked = rank_replicas(copies, {("t", 0): Leadership(2, 3, (1, 2, 3), 137)})
    assert ranks(ranked) == [2, 1, 3]
    assert "KRaft metadata log: broker 2 at leader epoch 3 (metadata offset 137)" in ranked[0].reason
    assert len({r.reason for r in ranked}) == 1  # one sentence per partition


def test_a_leader_whose_copy_is_cut_short_gives_way_to_an_intact_copy() -> None:
    copies = [copy(1, end=60, hw=70), copy(2)]
    ranked = rank_replicas(copies, {("t", 0): Leadership(1, 0, (1, 2), 12)})
    assert ranks(ranked) == [2, 1]
    assert "names broker 1 leader" in ranked[0].reason and "cut short" in ranked[0].reason


def test_without_a_leader_in_the_dump_the_highest_leader_epoch_speaks() -> None:
    copies = [copy(1, epoch=4, end=80, hw=80), copy(2, epoch=5, end=75, hw=75), copy(3, epoch=None, end=99, hw=99)]
    for leaders in ({}, {("t", 0): Leadership(-1, 6, (), 40)}, {("t", 0): Leadership(7, 6, (7,), 40)}):
        ranked = rank_replicas(copies, leaders)
        assert ranks(ranked) == [2, 1, 3]
        assert "the highest leader epoch in its leader-epoch-checkpoint, 5" in ranked[0].reason
    assert "names no leader" in rank_replicas(copies, {("t", 0): Leadership(-1, 6, (), 40)})[0].reason
    assert "whose copy is not in the dump" in rank_replicas(copies, {("t", 0): Leadership(7, 6, (7,), 40)})[0].reason


def test_at_one_leader_epoch_the_longest_log_then_the_highest_hw_then_the_lowest_broker() -> None:
    longest = rank_replicas([copy(1, end=60, hw=60), copy(2, end=70, hw=60)], {})
    assert ranks(longest) == [2, 1] and "the longest log: ends at 70" in longest[0].reason
    highest = rank_replicas([copy(1, hw=60), copy(2, hw=70)], {})
    assert ranks(highest) == [2, 1] and "the highest high watermark, 70" in highest[0].reason
    alike = rank_replicas([copy(3), copy(2), copy(None, log_dir="x")], {})
    assert ranks(alike) == [2, 3, None] and "the lowest broker id" in alike[0].reason


def test_a_copy_cut_short_comes_last_even_at_a_higher_leader_epoch() -> None:
    ranked = rank_replicas([copy(1, end=60, hw=70, epoch=2), copy(2, epoch=1)], {})
    assert ranks(ranked) == [2, 1]
    assert "broker 1 (broker-1)'s copy is cut short (its checkpoint says high watermark 70, its log ends at 60)" \
        in ranked[0].reason


def test_partitions_are_ranked_apart() -> None:
    a = CopyFacts(1, "b1", "t", 0, 10, 10, 0)
    b = CopyFacts(2, "b2", "t", 1, 10, 10, 0)
    ranked = rank_replicas([a, b], {})
    assert sorted(r.rank for r in ranked) == [1, 1]
