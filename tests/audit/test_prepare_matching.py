"""What follows each Prepare* on a partition, against a plain walk in time order.

Random producers write Prepare* records and markers on a few partitions, with shared
timestamps on purpose: a marker at the time of a Prepare* follows it, a second Prepare* at or
before a marker's time comes first, markers of one time are taken in offset order.
"""

from __future__ import annotations

import importlib
import random
from pathlib import Path
from typing import Any

import pytest

from tests.audit.builders import RawBuilder
from tests.audit.spark_matching import prepare_marker_matches

pytestmark = pytest.mark.spark

T0 = 1_800_000_000_000
PARTITIONS = [("a", 0), ("a", 1), ("b", 0)]
UNREAD = ("c", 0)  # listed by Prepare* records, absent from the dump


def _random_log(seed: int) -> RawBuilder:
    rng = random.Random(seed)
    b = RawBuilder()
    for pid in range(1, 5):
        for _ in range(rng.randint(0, 4)):
            listed = rng.sample(PARTITIONS, rng.randint(1, len(PARTITIONS))) + [UNREAD] * rng.randint(0, 1)
            state = rng.choice(["PrepareCommit", "PrepareAbort"])
            ts = T0 + rng.randint(0, 20)
            b.coordinator(f"t{pid}", pid=pid, epoch=rng.randint(0, 2), state=state, partitions=listed,
                          ts=ts, start=T0)
            if rng.random() < 0.5:  # decided: its Complete* next (or left stuck in Prepare*)
                b.coordinator(f"t{pid}", pid=pid, epoch=rng.randint(0, 2), state=state.replace("Prepare", "Complete"),
                              partitions=None, ts=ts + 1, start=T0)
        for _ in range(rng.randint(0, 8)):
            topic, partition = rng.choice(PARTITIONS)
            kind = rng.choice(["COMMIT", "ABORT", "UNKNOWN"])
            b.marker(topic, partition, pid=pid, epoch=rng.randint(0, 2), kind=kind, ts=T0 + rng.randint(0, 20))
    return b


def _expected(b: RawBuilder) -> dict[tuple[Any, ...], tuple[bool, str | None, int | None]]:
    """Per (transactional id, log offset, topic, partition): has_marker, next marker type and offset."""
    events: list[tuple[Any, ...]] = []  # (topic, partition, pid, ts, order, kind, row)
    for row in b.rows["txn_log"]:
        for tp in row["topic_partitions"] or []:
            events.append((tp["topic"], tp["partition"], row["producer_id"], row["txn_last_update_timestamp"],
                           (0, row["partition"], row["offset"]), "prepare", row))
    for row in b.rows["control_markers"]:
        events.append((row["topic"], row["partition"], row["producer_id"], row["timestamp"],
                       (1, row["offset"]), "marker", row))
    events.sort(key=lambda e: e[:5])
    expected = {}
    for i, (topic, partition, pid, _ts, _order, kind, row) in enumerate(events):
        if kind != "prepare":
            continue
        nxt = events[i + 1] if i + 1 < len(events) and events[i + 1][:3] == (topic, partition, pid) else None
        marker = nxt[6] if nxt is not None and nxt[5] == "marker" else None
        expected[(row["transactional_id"], row["offset"], topic, partition)] = (
            marker is not None and marker["producer_epoch"] == row["producer_epoch"],
            None if marker is None else marker["marker_type"],
            None if marker is None else marker["offset"],
        )
    return expected


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reading", ["windows", "pass"])
def test_each_prepare_is_matched_with_the_event_after_it(spark: Any, seed: int, reading: str, tmp_path: Any) -> None:
    """Spark windows ordering the markers (the reference, ``spark_matching``), and the producer
    pass's tasks following them (the tables' files, as a scan reads them)."""
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    b = _random_log(seed)
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    if reading == "pass":
        matches = reconstruct(tables, as_of_ms=T0 + 60_000, late_tolerance_ms=1_000,
                              output=DerivedOutput(str(tmp_path))).prepare_follows
    else:
        matches = prepare_marker_matches(tables["txn_log"], tables["control_markers"])
    got = {
        (r["transactional_id"], r["txn_log_offset"], r["topic"], r["partition"]):
            (r["has_marker"], r["next_marker_type"], r["next_marker_offset"])
        for r in matches.collect()
    }
    assert got == _expected(b)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("split", [False, True])
def test_the_pass_gives_each_prepare_with_its_record_as_spark_would(spark: Any, seed: int, split: bool,
                                                                    tmp_path: Any, monkeypatch: Any) -> None:
    """The rows the rules read, from the pass's tasks (the tables' files) and from Spark windows
    ordering the markers with ``prepare_records`` (the reference): equal in every column, the
    Prepare* records on partitions absent from the dump included. ``split``: each partition is
    read in shares of its producers, by many tasks, each given only its share's records."""
    from txn_audit.reconstruct import FOLLOW_FIELDS, DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    # the module (the package's ``transactions`` is a function of it)
    transactions = importlib.import_module("txn_audit.reconstruct.transactions")
    shares = []
    if split:
        whole = transactions.pass_items

        def in_shares(batch_files: Any, marker_files: Any, parallelism: int) -> Any:
            items = whole(batch_files, marker_files, 64, share_rows=1)
            shares.extend(item["shares"] for item in items)
            return items

        monkeypatch.setattr(transactions, "pass_items", in_shares)
    b = _random_log(seed)
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    recon = reconstruct(tables, as_of_ms=T0 + 60_000, late_tolerance_ms=1_000, output=DerivedOutput(str(tmp_path)))

    def rows(matches: Any) -> list[dict[str, Any]]:
        return sorted((r.asDict() for r in matches.select(*FOLLOW_FIELDS.names).collect()),
                      key=lambda r: repr(sorted(r.items())))

    from_files = rows(recon.prepare_follows)
    in_spark = rows(prepare_marker_matches(tables["txn_log"], tables["control_markers"]))
    assert from_files == in_spark
    listed = sum(len(r["topic_partitions"] or []) for r in b.rows["txn_log"] if r["state"].startswith("Prepare"))
    assert len(from_files) == listed
    assert any(r["next_state"] is None for r in from_files) == any(r["next_state"] is None for r in in_spark)
    assert (max(shares) > 1) if split else not shares


@pytest.mark.parametrize("seed", range(8))
def test_the_unsettled_rows_give_every_coordinator_finding(spark: Any, seed: int, tmp_path: Any) -> None:
    """The rules of the coordinator's decisions (``decision_rules``) over the unsettled rows
    (``decision_rules.UNSETTLED``, read on the driver by ``detect.match_rows``) find what they
    find over every row, and the settled rows are left out. Each producer also leaves a transaction open on some
    partitions, written before its Prepare* records, so that markers can be missing as well as
    stuck or of the other type."""
    from txn_audit.detect import match_rows, open_transaction_inputs, stuck_marker_rows
    from txn_audit.usage import AuditOptions
    from txn_audit.detect.decision_rules import UNSETTLED, decision_findings
    from txn_audit.detect.open_transaction_rules import OPEN
    from txn_audit.reconstruct import DerivedOutput, reconstruct
    from txn_audit.tables import load_raw_tables

    rng = random.Random(seed)
    b = _random_log(seed)
    for pid in range(1, 5):
        for topic, partition in rng.sample(PARTITIONS, rng.randint(0, len(PARTITIONS))):
            b.batch(topic, partition, pid=pid, epoch=rng.randint(0, 2), seq=0, ts=T0 - 5, txn=True)
    b.write(tmp_path / "tables")
    tables = load_raw_tables(spark, tmp_path / "tables")
    opts = AuditOptions(as_of_ms=T0 + 60_000, max_transaction_timeout_ms=60_000, late_tolerance_ms=1_000)
    found = []
    recon = reconstruct(tables, as_of_ms=opts.as_of_ms, late_tolerance_ms=1_000, output=DerivedOutput(str(tmp_path)))
    open_rows = recon.rows("partition_transactions", OPEN)
    _coordinator, previous = open_transaction_inputs(recon, open_rows)
    every, kept = match_rows(recon, None), match_rows(recon, UNSETTLED)
    for rows in (every, kept):
        found.append(sorted(decision_findings(
            rows, open_rows, previous, stuck_marker_rows(recon, rows), opts.as_of_ms, opts.prepare_grace_ms,
            opts.clock_skew_ms).to_pylist(), key=repr))
    settled = [r for r in every.to_pylist() if r["has_marker"] and r["next_state"] is not None
               and r["next_marker_type"] == r["decision"]]
    assert kept.num_rows == every.num_rows - len(settled)
    assert found[0] == found[1]


def _prepares(b: RawBuilder, topic: str, partition: int, *, untimed: int = -1) -> Any:
    """``PREPARE_FIELDS`` rows of the Prepare* records listing ``topic``-``partition``; the
    ``untimed``-th record (by log offset) has no update time."""
    import pyarrow as pa

    from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS

    rows = []
    for row in b.rows["txn_log"]:
        if any((tp["topic"], tp["partition"]) == (topic, partition) for tp in row["topic_partitions"] or []):
            rows.append({"topic": topic, "partition": partition, "producer_id": row["producer_id"],
                         "epoch": row["producer_epoch"], "ts": None if row["offset"] == untimed else
                         row["txn_last_update_timestamp"], "txn_log_partition": row["partition"],
                         "txn_log_offset": row["offset"]})
    return pa.Table.from_pylist(rows, schema=PREPARE_FIELDS)


@pytest.mark.parametrize("seed", range(12))
def test_the_pass_tasks_follower_agrees_with_the_walk(seed: int) -> None:
    """The pass tasks' way (``reconstruct.prepare_follows``): each partition's markers seen in
    chunks, in an order other than time's; a record without a time is followed by no marker."""
    import pyarrow as pa

    from txn_audit.reconstruct.ordered_pass import DATA, MARKER, pass_input
    from txn_audit.reconstruct.prepare_follows import PrepareFollower
    from txn_audit.schemas import RAW_TABLES, in_ms

    rng = random.Random(seed)
    b = _random_log(seed)
    untimed = rng.randrange(len(b.rows["txn_log"])) if b.rows["txn_log"] and seed % 3 == 0 else -1
    if untimed >= 0:
        b.rows["txn_log"][untimed]["txn_last_update_timestamp"] = None
    expected = _expected_untimed(b)
    got = {}
    for topic, partition in [*PARTITIONS, UNREAD]:
        follower = PrepareFollower(_prepares(b, topic, partition, untimed=untimed))
        markers = [r for r in b.rows["control_markers"] if (r["topic"], r["partition"]) == (topic, partition)]
        data = [r for r in b.rows["batches"] if (r["topic"], r["partition"]) == (topic, partition)][:3]
        rows = pa.concat_tables([pass_input(pa.Table.from_pylist(data, schema=in_ms(RAW_TABLES["batches"])), DATA),
                                 pass_input(pa.Table.from_pylist(markers, schema=in_ms(RAW_TABLES["control_markers"])),
                                            MARKER)])
        rows = rows.take(pa.array(rng.sample(range(rows.num_rows), rows.num_rows), pa.int64()))  # any order
        for chunk in rows.to_batches(max_chunksize=1 if seed % 2 else rng.randint(2, 4)):  # one marker per chunk too
            follower.add(chunk)
        ids = {r["offset"]: r["transactional_id"] for r in b.rows["txn_log"]}
        for r in follower.rows().to_pylist():
            got[(ids[r["txn_log_offset"]], r["txn_log_offset"], r["topic"], r["partition"])] = (
                r["has_marker"], r["next_marker_type"], r["next_marker_offset"])
    assert got == expected


def _expected_untimed(b: RawBuilder) -> dict[tuple[Any, ...], tuple[bool, str | None, int | None]]:
    """``_expected`` where a Prepare* record without a time sorts first, and markers count only
    from the first timed Prepare* record of their producer on the partition (as Spark orders them)."""
    timed = [r for r in b.rows["txn_log"] if r["txn_last_update_timestamp"] is not None]
    untimed = [r for r in b.rows["txn_log"] if r["txn_last_update_timestamp"] is None]
    expected = _expected(RawBuilder(rows={**b.rows, "txn_log": timed}))
    for row in untimed:
        for tp in row["topic_partitions"] or []:
            expected[(row["transactional_id"], row["offset"], tp["topic"], tp["partition"])] = (False, None, None)
    return expected


@pytest.mark.parametrize("arrival", [[0, 1, 2], [2, 1, 0], [1, 2, 0]])
def test_of_markers_of_one_time_the_follower_takes_the_lowest_offset(arrival: list[int]) -> None:
    """Whatever chunk each marker comes in: the next event is the marker of lowest offset among
    those of the earliest time at or after the Prepare* record."""
    import pyarrow as pa

    from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, PrepareFollower

    prepare = {"topic": "a", "partition": 0, "producer_id": 1, "epoch": 2, "ts": T0, "txn_log_partition": 0,
               "txn_log_offset": 9}
    follower = PrepareFollower(pa.Table.from_pylist([prepare], schema=PREPARE_FIELDS))
    markers = [(T0 + 5, 7, 1, "ABORT"), (T0 + 5, 3, 2, "COMMIT"), (T0 + 6, 1, 2, "ABORT")]
    for index in arrival:
        ts, offset, epoch, kind = markers[index]
        follower.add(pa.RecordBatch.from_pylist([{"topic": "a", "partition": 0, "producer_id": 1, "is_marker": True,
                                                  "max_timestamp": ts, "offset": offset, "epoch": epoch,
                                                  "marker_type": kind}]))
    (row,) = follower.rows().to_pylist()
    assert (row["has_marker"], row["next_marker_type"], row["next_marker_offset"]) == (True, "COMMIT", 3)


def test_one_follower_keeps_partitions_apart() -> None:
    """A follower of several partitions' records (a group of small replicas passed over together)
    answers each as a follower of its partition alone does: a producer's marker on one partition
    never follows its record on another."""
    import pyarrow as pa

    from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, PrepareFollower

    prepares = [{"topic": topic, "partition": partition, "producer_id": 1, "epoch": 2, "ts": T0,
                 "txn_log_partition": 0, "txn_log_offset": offset}
                for offset, (topic, partition) in enumerate([("a", 0), ("a", 1), ("b", 0)])]
    # a-0's marker comes late, a-1's early and of another epoch, b-0 gets none (b-1's is not its own)
    markers = [("a", 0, T0 + 9, 40, 2, "COMMIT"), ("a", 1, T0 + 1, 7, 1, "ABORT"), ("b", 1, T0 + 2, 5, 2, "COMMIT")]
    rows = pa.RecordBatch.from_pylist([{"topic": t, "partition": p, "producer_id": 1, "is_marker": True,
                                        "max_timestamp": ts, "offset": o, "epoch": e, "marker_type": k}
                                       for t, p, ts, o, e, k in markers])

    def answers(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[Any, ...]]:
        follower = PrepareFollower(pa.Table.from_pylist(records, schema=PREPARE_FIELDS))
        follower.add(rows)
        return {(r["topic"], r["partition"]): (r["has_marker"], r["next_marker_type"], r["next_marker_offset"])
                for r in follower.rows().to_pylist()}

    together = answers(prepares)
    assert together == {key: value for record in prepares for key, value in answers([record]).items()}
    assert together == {("a", 0): (True, "COMMIT", 40), ("a", 1): (False, "ABORT", 7), ("b", 0): (False, None, None)}


def test_read_prepares_keeps_the_records_of_the_partitions_asked_for(tmp_path: Path) -> None:
    """``prepare_follows.read_prepares``: the records on one of the partitions asked for, or with
    ``elsewhere`` every other one (a record without topic or partition included), across files,
    as a row-by-row check of each record's (topic, partition) says."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from txn_audit.reconstruct.prepare_follows import PREPARE_FIELDS, read_prepares

    places = [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("c", 2), (None, 0), ("a", None)]
    for number in range(3):
        rows = [{"topic": topic, "partition": partition, "producer_id": number * 100 + i}
                for i, (topic, partition) in enumerate(places * (number + 1))]
        pq.write_table(pa.Table.from_pylist(rows, schema=PREPARE_FIELDS), tmp_path / f"part-{number}.parquet")
    every = pa.concat_tables(pq.read_table(p, schema=PREPARE_FIELDS) for p in sorted(tmp_path.glob("*.parquet")))
    asked = [("a", 1), ("b", 0), ("c", 2), ("d", 7)]

    def ids(table: pa.Table) -> list[int]:
        return sorted(table.column("producer_id").to_pylist())

    on = [r["producer_id"] for r in every.to_pylist() if (r["topic"], r["partition"]) in asked]
    assert ids(read_prepares(str(tmp_path), asked)) == sorted(on) and on
    assert ids(read_prepares(str(tmp_path), asked, elsewhere=True)) == sorted(
        r["producer_id"] for r in every.to_pylist() if (r["topic"], r["partition"]) not in asked)
    assert read_prepares(str(tmp_path), []).num_rows == 0
    assert ids(read_prepares(str(tmp_path), [], elsewhere=True)) == ids(every)
