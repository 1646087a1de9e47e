"""Spark ingest of the real-broker corpus, checked against Kafka's own tool output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.ondemand import OnDemand
from tests.realcorpus import SCENARIOS, dump_log, dumped_partitions, needs_corpus, offsets_json, scenario_dir

pytestmark = [pytest.mark.corpus, needs_corpus]


@pytest.fixture(scope="module")
def ingested(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> OnDemand[Path]:
    """Each scenario's raw tables, ingested when a selected test first asks for them."""
    from txn_audit import api

    def ingest(name: str) -> Path:
        target = tmp_path_factory.mktemp(name)
        api.ingest(scenario_dir(name) / "logdirs", target, spark=spark, progress=False)
        return target

    return OnDemand(SCENARIOS, ingest)


def _rows(spark: Any, path: Path) -> list[dict[str, Any]]:
    """A raw table's rows as the package reads them: its instants as epoch ms, Kafka's digits."""
    from txn_audit.schemas import RAW_TABLES, read_frame

    return [r.asDict(recursive=True) for r in read_frame(spark, RAW_TABLES[path.name], str(path)).collect()]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_batches_and_markers_equal_dump_log(spark: Any, ingested: OnDemand[Path], scenario: str) -> None:
    out = ingested[scenario]
    ours = {
        (r["file"], r["position"]): r
        for r in _rows(spark, out / "batches")
    }
    markers = {(r["topic"], r["partition"], r["offset"]): r for r in _rows(spark, out / "control_markers")}
    expected_batches = 0
    expected_markers = 0
    for part in dumped_partitions(scenario):
        for f in dump_log(scenario, part):
            if not f.path.endswith(".log"):
                continue
            rel = f.path.removeprefix("logdirs/")
            for b in f.batches:
                expected_batches += 1
                d = b.fields
                row = ours[(rel, int(d["position"]))]
                assert (row["base_offset"], row["last_offset"], row["record_count"]) == (
                    int(d["baseOffset"]), int(d["lastOffset"]), int(d["count"]))
                assert (row["producer_id"], row["producer_epoch"]) == (int(d["producerId"]), int(d["producerEpoch"]))
                assert (row["base_sequence"], row["last_sequence"]) == (int(d["baseSequence"]), int(d["lastSequence"]))
                assert row["partition_leader_epoch"] == int(d["partitionLeaderEpoch"])
                assert row["is_transactional"] == (d["isTransactional"] == "true")
                assert row["is_control"] == (d["isControl"] == "true")
                assert row["max_timestamp"] == int(d["CreateTime"])
                assert (row["size_bytes"], row["magic"], row["codec"]) == (int(d["size"]), int(d["magic"]),
                                                                         d["compresscodec"])
                assert row["stored_crc"] == int(d["crc"]) and row["crc_ok"] == (d["isvalid"] == "true")
                for rec in b.records:
                    if "endTxnMarker" in rec:
                        expected_markers += 1
                        topic, _, p = part.rpartition("-")
                        m = markers[(topic, int(p), int(rec["offset"]))]
                        assert m["marker_type"] == rec["endTxnMarker"]
                        assert m["coordinator_epoch"] == int(rec["coordinatorEpoch"])
                        assert (m["producer_id"], m["producer_epoch"]) == (row["producer_id"], row["producer_epoch"])
                        assert m["timestamp"] == int(rec["CreateTime"])
    non_metadata = [k for k in ours if not k[0].split("/")[-2].startswith("__cluster_metadata")]
    assert expected_batches == len(non_metadata) > 0
    assert expected_markers == len(markers)


def _txn_payload(r: dict[str, Any]) -> str:
    parts = r["topic_partitions"] or []
    names = sorted(f"{p['topic']}-{p['partition']}" for p in parts)
    return (f"producerId:{r['producer_id']},producerEpoch:{r['producer_epoch']},state={r['state']},"
            f"partitions=[{','.join(names)}],txnLastUpdateTimestamp={r['txn_last_update_timestamp']},"
            f"txnTimeoutMs={r['txn_timeout_ms']}")


def _normalise_payload(text: str) -> str:
    head, _, rest = text.partition("partitions=[")
    inner, _, tail = rest.partition("]")
    return head + "partitions=[" + ",".join(sorted(x for x in inner.split(",") if x)) + "]" + tail


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_txn_log_equals_transaction_log_decoder(spark: Any, ingested: OnDemand[Path], scenario: str) -> None:
    ours = {(r["partition"], r["offset"]): r for r in _rows(spark, ingested[scenario] / "txn_log")}
    seen = 0
    for part in dumped_partitions(scenario):
        if not part.startswith("__transaction_state"):
            continue
        p = int(part.rpartition("-")[2])
        for f in dump_log(scenario, part):
            for b in f.batches:
                for rec in b.records:
                    seen += 1
                    row = ours[(p, int(rec["offset"]))]
                    assert rec["key"] == f"transaction_metadata::transactionalId={row['transactional_id']}"
                    if rec["payload"] == "<DELETE>":
                        assert row["tombstone"]
                    else:
                        assert _txn_payload(row) == _normalise_payload(rec["payload"])
    assert seen == len(ours) > 0


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_snapshots_and_txnindex_equal_dump(spark: Any, ingested: OnDemand[Path], scenario: str) -> None:
    snaps = {(r["file"], r["producer_id"]): r for r in _rows(spark, ingested[scenario] / "producer_snapshots")}
    aborted = {(r["file"], r["last_offset"]): r for r in _rows(spark, ingested[scenario] / "aborted_txns")}
    n_snap = n_idx = 0
    for part in dumped_partitions(scenario):
        for f in dump_log(scenario, part):
            rel = f.path.removeprefix("logdirs/")
            for line in f.lines:
                if f.path.endswith(".snapshot"):
                    n_snap += 1
                    row = snaps[(rel, int(line["producerId"]))]
                    cur = line["currentTxnFirstOffset"]
                    expected_cur = -1 if cur == "OptionalLong.empty" else int(cur.removeprefix("OptionalLong[")[:-1])
                    assert row["current_txn_first_offset"] == expected_cur
                    assert row["producer_epoch"] == int(line["producerEpoch"])
                    assert row["coordinator_epoch"] == int(line["coordinatorEpoch"])
                    assert row["timestamp"] == int(line["lastTimestamp"])
                    if "lastOffset" in line:
                        assert row["last_offset"] == int(line["lastOffset"])
                        assert row["last_sequence"] == int(line["lastSequence"])
                        assert row["offset_delta"] == int(line["offsetDelta"])
                    assert row["crc_ok"]
                elif f.path.endswith(".txnindex"):
                    n_idx += 1
                    row = aborted[(rel, int(line["lastOffset"]))]
                    assert (row["producer_id"], row["first_offset"], row["last_stable_offset"]) == (
                        int(line["producerId"]), int(line["firstOffset"]), int(line["lastStableOffset"]))
    assert n_snap == len(snaps)
    assert n_idx == len(aborted)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_partition_offsets_equal_broker_offsets(spark: Any, ingested: OnDemand[Path], scenario: str) -> None:
    rows = {f"{r['topic']}-{r['partition']}": r for r in _rows(spark, ingested[scenario] / "partition_offsets")}
    expected = offsets_json(scenario)
    assert expected
    for name, exp in expected.items():
        assert rows[name]["high_watermark"] == exp["high_watermark"], name
        assert rows[name]["log_start_offset"] == exp["log_start_offset"], name
        assert rows[name]["broker_id"] == 1


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_real_corpus_decodes_without_issues(spark: Any, ingested: OnDemand[Path], scenario: str) -> None:
    issues = _rows(spark, ingested[scenario] / "decode_issues")
    assert [i for i in issues if i["severity"] != "info"] == []
    segments = _rows(spark, ingested[scenario] / "segments")
    logs = [s for s in segments if s["kind"] == "log" and s["status"] == "live" and s["topic"] != "__cluster_metadata"]
    assert logs and all(s["decoded"] for s in logs)
