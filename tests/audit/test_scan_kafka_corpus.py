"""Scan verdicts on the committed real-broker corpus of every Kafka release, against what the live
brokers and Kafka's own tools said (``tests/corpus``, written by ``make kafka-corpus``).

For every scenario of every release: the scan of the log dirs gives each partition's high
watermark, last stable offset and log start offset as the broker reported them, and exactly
the transactions ``kafka-transactions.sh find-hanging`` listed (judged as the tool judged them:
at its run time, with its one-minute timeout); the scan of the ``kafka-dump-log`` text of the
same files gives the same findings and last stable offsets as the binary scan.
"""

from __future__ import annotations

import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tests.kafkacorpus import (
    INCIDENT_CAUSES,
    CoordinatorRecord,
    CorpusScenario,
    coordinator_records,
    data_records_between,
    incidents_explaining,
    scenarios,
)
from tests.ondemand import OnDemand
from txn_audit.detect.offset_ranges import uncovered
from txn_audit.formats.dumplog_text import parse_dump_log
from txn_audit.severity import Severity

pytestmark = [pytest.mark.corpus]

ONE_MINUTE = 60_000
SCENARIOS = scenarios()
IDS = [s.id for s in SCENARIOS]


NEWEST = max((s.version for s in SCENARIOS), key=lambda v: tuple(int(x) for x in v.split(".")), default="")


def _scan(spark: Any, scenario: CorpusScenario, *, text: bool) -> Any:
    """A scan as find-hanging judged: at its run time, with its one-minute timeout. The data-quality
    suites run on the newest release's binary scans (they cost more than the scan itself)."""
    from txn_audit import api

    source = scenario.folder / ("tools" if text else "logdirs")
    return api.scan(source, spark=spark, options=api.AuditOptions(
        as_of_ms=scenario.as_of_ms, max_transaction_timeout_ms=ONE_MINUTE, progress=False,
        quality=not text and scenario.version == NEWEST, report=False, input_kind="text" if text else "auto"))


BY_ID = {s.id: s for s in SCENARIOS}


@pytest.fixture(scope="module")
def scans(spark: Any) -> OnDemand[Any]:
    """Each scenario's binary scan, made when a selected test first asks for it."""
    return OnDemand(BY_ID, lambda key: _scan(spark, BY_ID[key], text=False))


@pytest.fixture(scope="module")
def text_scans(spark: Any) -> OnDemand[Any]:
    """Each scenario's scan of its ``kafka-dump-log`` text, made when a selected test first asks for it."""
    return OnDemand(BY_ID, lambda key: _scan(spark, BY_ID[key], text=True))


def test_the_corpus_covers_every_release_and_scenario() -> None:
    versions = {s.version for s in SCENARIOS}
    assert {"2.8.2", "3.6.2", "3.9.2", "4.0.2", "4.1.2"} <= versions
    assert any(v.startswith("4.") and v > "4.1.2" for v in versions)
    # transaction version 2 finalized on the 4.x clusters, and one cluster left below it
    for s in SCENARIOS:
        if s.version.startswith("4.") and not s.name.endswith("-tv1"):
            assert s.expected["transaction_version"] == 2, s.id
    assert any(s.expected["transaction_version"] in (0, 1) for s in SCENARIOS if s.version >= "3.9")


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_hw_lso_and_log_start_equal_the_brokers(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    ours = {f"{p.topic}-{p.partition}": p for p in scans[scenario.id].partitions}
    for name, broker in scenario.broker_offsets.items():
        got = {k: getattr(ours[name], k) for k in ("high_watermark", "last_stable_offset", "log_start_offset")}
        want = {k: broker[k] for k in ("high_watermark", "last_stable_offset", "log_start_offset")}
        assert got == want, name


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.version == NEWEST], ids=[s.id for s in SCENARIOS
                                                                                        if s.version == NEWEST])
def test_no_invariant_is_broken_on_real_data(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """Real brokers keep Kafka's invariants: the data-quality suites find nothing to report."""
    broken = [f.evidence for f in scans[scenario.id].findings if f.kind == "invariant_violation"]
    assert broken == []


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.find_hanging_rows is not None],
                         ids=[s.id for s in SCENARIOS if s.find_hanging_rows is not None])
def test_hanging_set_equals_find_hanging(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    ours = {
        (f.topic, f.partition, f.producer_id, f.producer_epoch, f.first_offset)
        for f in scans[scenario.id].findings
        if f.kind == "hanging_transaction"
    }
    assert ours == scenario.find_hanging_rows


def _finding_keys(result: Any) -> list[tuple[Any, ...]]:
    fields = ("kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
              "first_offset", "last_offset", "first_timestamp", "last_timestamp")
    # invariant_violation comes from the data-quality suites, which the text scans skip
    return sorted((tuple(getattr(f, k) for k in fields) for f in result.findings if f.kind != "invariant_violation"),
                  key=repr)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_text_dump_gives_the_same_findings_and_lso(
    scans: OnDemand[Any], text_scans: OnDemand[Any], scenario: CorpusScenario
) -> None:
    """The same findings and the same LSOs."""
    assert _finding_keys(text_scans[scenario.id]) == _finding_keys(scans[scenario.id])
    binary = {(p.topic, p.partition): p for p in scans[scenario.id].partitions}
    text = {(p.topic, p.partition): p for p in text_scans[scenario.id].partitions}
    # the KRaft metadata log is no audited partition, of either scan
    assert set(text) == set(binary) and "__cluster_metadata" not in {k[0] for k in binary}
    for key, p in text.items():
        assert p.last_stable_offset == binary[key].last_stable_offset, key
    # the HW of the data partitions comes from the offsets the live broker gave (tools/offsets.json)
    for name, broker in scenario.expected["partitions"].items():
        p = text[(broker["topic"], broker["partition"])]
        assert (p.high_watermark, p.hw_source) == (broker["high_watermark"], "offsets_file"), name


# -- scanned as users scan: no audit time, the default timeout -------------------------------------


def _default_scan(spark: Any, scenario: CorpusScenario) -> Any:
    from txn_audit import api

    return api.scan(scenario.folder / "logdirs", spark=spark, options=api.AuditOptions(progress=False, quality=False, report=False))


@pytest.fixture(scope="module")
def default_scans(spark: Any) -> OnDemand[Any]:
    """Each scenario's log dirs scanned with no option, made when a selected test first asks for it."""
    return OnDemand(BY_ID, lambda key: _default_scan(spark, BY_ID[key]))


def _incident_kinds(result: Any) -> list[str]:
    return sorted(i.kind for i in result.incidents_at_or_above("warning"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_without_an_audit_time_the_verdict_is_find_hangings(default_scans: OnDemand[Any], scans: OnDemand[Any],
                                                            scenario: CorpusScenario) -> None:
    """A scan without ``--as-of`` or a timeout audits at the moment the copy was taken, as the dump
    dates it (never before its newest record), and gives the hanging set find-hanging gave and
    the incidents of the scan at its run time: each hanging transaction of the corpus is proven by
    the coordinator's log, whatever the audit time."""
    default, at_find_hanging = default_scans[scenario.id], scans[scenario.id]
    assert default.audit_time.source != "given"
    assert default.as_of_ms >= (default.audit_time.newest_record_ms or 0)
    if scenario.find_hanging_rows is not None:
        ours = {(f.topic, f.partition, f.producer_id, f.producer_epoch, f.first_offset)
                for f in default.findings if f.kind == "hanging_transaction"}
        assert ours == scenario.find_hanging_rows
    assert _incident_kinds(default) == _incident_kinds(at_find_hanging)


# -- compacted topics: what the cleaner removed is no anomaly -------------------------------------

def _compacted_topics(scenario: CorpusScenario) -> set[str]:
    """The topics the live cluster described as compacted, internal ones included."""
    return {topic for topic, configs in scenario.expected.get("topic_configs", {}).items()
            if "compact" in configs.get("cleanup.policy", "")}


COMPACTED = [s for s in SCENARIOS if any(not t.startswith("__") for t in _compacted_topics(s))]


@pytest.mark.parametrize("scenario", COMPACTED, ids=[s.id for s in COMPACTED])
def test_a_compacted_topic_shows_the_cleaners_work_and_what_a_held_lso_costs(
        scans: OnDemand[Any], text_scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """On the topics the cluster described as compacted (their configs, as ``describeConfigs``
    gave them), whose cleaner-offset-checkpoint the broker wrote: no sequence gap (the cleaner's
    removals), and a held LSO there says the cleaner cannot clean past it; a deleting topic's
    held LSO does not."""
    compacted = _compacted_topics(scenario)
    assert compacted and scenario.expected["cleaner_offset_checkpoint"]
    result = scans[scenario.id]
    assert [f for f in result.findings if f.kind == "sequence_gap" and f.topic in compacted] == []
    # nor from the text, which has no cleaner checkpoint: the gaps the cleaner left, as
    # kafka-dump-log printed them, are across offsets it printed no batch for
    assert [f for f in text_scans[scenario.id].findings if f.kind == "sequence_gap" and f.topic in compacted] == []
    for gap in scenario.expected.get("cleaner_sequence_gaps", []):
        printed = parse_dump_log(scenario.folder / "tools" / "dump-log" / f"{gap['topic']}-{gap['partition']}.txt")
        after, before = gap["kept_before"]["last_offset"], gap["kept_after"]["base_offset"]
        between = [(b.base_offset, b.last_offset) for b in printed.batches
                   if b.base_offset is not None and b.last_offset > after and b.base_offset < before]
        assert uncovered(between, after + 1, before - 1), gap
    held = [f for f in result.findings if f.kind == "stuck_lso"]
    assert any(f.topic in compacted for f in held)
    for f in held:
        assert ("the topic is compacted" in f.evidence) == (f.topic in compacted), f.evidence


# -- tiered storage: what lives only in the remote store is said, not guessed -------------------

TIERED = [s for s in SCENARIOS if s.expected.get("tiered_offsets")]


@pytest.mark.parametrize("scenario", TIERED, ids=[s.id for s in TIERED])
def test_the_remote_only_offsets_of_a_tiered_topic_are_named_not_examined(scans: OnDemand[Any],
                                                                         scenario: CorpusScenario) -> None:
    """Per tiered partition, the offsets from the log start to the earliest local offset the live
    broker reported (``ListOffsets`` earliest-local) are one info finding saying they live only in
    the remote store and were not examined; the open transaction starts above them, and the
    index cache in the log dirs is no damage."""
    result = scans[scenario.id]
    remote = {(f.topic, f.partition): f for f in result.findings if f.kind == "remote_only_range"}
    for name, live in scenario.expected["tiered_offsets"].items():
        found = remote.pop((live["topic"], live["partition"]))
        assert (found.first_offset, found.last_offset) == (live["log_start_offset"], live["earliest_local"] - 1)
        assert found.severity == "info" and "not examined" in found.evidence, name
        assert f"copied segments holding offsets {live['log_start_offset']}-{live['latest_tiered']}" in found.evidence
        assert live["last_stable_offset"] >= live["earliest_local"], name
    assert remote == {}
    assert [f for f in result.findings if f.kind == "remote_range_unlisted"] == []
    assert [f for f in result.findings if f.kind in ("unreadable_input", "corrupt_batch")] == []


# -- text dumps as brokers print them: the same paths on every broker, or no partition folder -----

CLUSTER_TEXT = [s for s in SCENARIOS if s.brokers > 1 and s.version == NEWEST]


def _as_each_broker_printed(tools: Path, target: Path, *, bare: bool) -> None:
    """A copy of ``tools/`` whose ``Dumping`` lines print the paths each broker's own log dir has
    (``/var/lib/kafka/data/<partition>/<file>``, the same on every broker), or, with ``bare``, the
    file names alone (``kafka-dump-log.sh --files 00000000000000000000.log`` run inside the
    partition folder); the text files stay in ``dump-log/broker-<id>/<partition>.txt``."""
    shutil.copytree(tools, target)
    for text in (target / "dump-log").rglob("*.txt"):
        lines = text.read_text().splitlines(keepends=True)
        for i, line in enumerate(lines):
            if line.startswith("Dumping "):
                path = PurePosixPath(line[len("Dumping "):].strip())
                lines[i] = f"Dumping {path.name if bare else f'/var/lib/kafka/data/{path.parent.name}/{path.name}'}\n"
        text.write_text("".join(lines))


@pytest.mark.parametrize("bare", [False, True], ids=["absolute-paths", "bare-file-names"])
@pytest.mark.parametrize("scenario", CLUSTER_TEXT, ids=[s.id for s in CLUSTER_TEXT])
def test_every_brokers_text_dump_is_its_own_copy(spark: Any, scans: OnDemand[Any], tmp_path: Path,
                                                 scenario: CorpusScenario, bare: bool) -> None:
    """Three brokers' ``kafka-dump-log`` text, one folder each, printing the same paths: every
    partition is audited from three copies, with the binary scan's findings and LSOs."""
    from txn_audit import api

    tools = tmp_path / "tools"
    _as_each_broker_printed(scenario.folder / "tools", tools, bare=bare)
    text = api.scan(tools, spark=spark, options=api.AuditOptions(as_of_ms=scenario.as_of_ms, max_transaction_timeout_ms=ONE_MINUTE, progress=False, quality=False, report=False, input_kind="text"))
    binary = scans[scenario.id]
    assert _finding_keys(text) == _finding_keys(binary)
    assert {(p.topic, p.partition): p.last_stable_offset for p in text.partitions} == {
        (p.topic, p.partition): p.last_stable_offset for p in binary.partitions}
    copies: dict[str, int] = {}
    for r in text.replicas:
        copies[f"{r.topic}-{r.partition}"] = copies.get(f"{r.topic}-{r.partition}", 0) + 1
    assert copies == {name: scenario.copies(name) for name in copies} and max(copies.values()) > 1


def test_text_whose_partition_cannot_be_told_is_a_finding(spark: Any, tmp_path: Path) -> None:
    """A dump-log file that names no partition, in its paths or its name, is one finding naming
    the file and its first section's line, never a silent skip or a CLEAN verdict."""
    from txn_audit import api

    scenario = next(s for s in SCENARIOS if s.version == NEWEST and s.name == "healthy")
    tools = tmp_path / "tools"
    _as_each_broker_printed(scenario.folder / "tools", tools, bare=True)
    (tools / "dump-log" / "orders-0.txt").rename(tools / "dump-log" / "notes.txt")
    result = api.scan(tools, spark=spark, options=api.AuditOptions(progress=False, quality=False, report=False, input_kind="text"))
    (unplaced,) = [f for f in result.findings if f.file == "dump-log/notes.txt"]
    assert unplaced.severity >= "warning" and "3 lines (3, 303, 312): " in unplaced.evidence
    assert "names a partition" in unplaced.evidence and "'Dumping 00000000000000000000.log'" in unplaced.evidence
    assert not api.verdict(result, Severity.WARNING).startswith("CLEAN")
    assert ("orders", 0) not in {(p.topic, p.partition) for p in result.partitions}


# -- what each scenario planted, and what it did not ---------------------------------------------

#: scenarios in which nothing went wrong (or Kafka refused what would have): no finding at warning
QUIET = {"healthy", "timeout-abort", "verification-rejects", "fenced-zombie", "eos", "follower-killed",
         "coordinator-killed", "epoch-rotation", "epoch-exhaustion-abort"}


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.name in QUIET or not s.expected["anomalies"]],
                         ids=[s.id for s in SCENARIOS if s.name in QUIET or not s.expected["anomalies"]])
def test_real_traffic_without_anomalies_raises_nothing(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """Real clients' normal behaviour (timestamps older than the previous marker, epoch bumps on
    every TV2 commit, producer-id rotation, fencing, coordinator aborts) is not an anomaly."""
    down = scenario.stayed_down
    loud = [(f.kind, f.topic, f.partition, f.evidence[:200])
            for f in scans[scenario.id].at_or_above("warning")
            # the copies of a broker that stayed down lack what the others wrote since (see below)
            if not (f.kind == "replica_divergence" and f.broker_id in down and f.severity == "warning")]
    assert loud == []
    for p in scans[scenario.id].partitions:
        assert (p.held_records, p.held_since_timestamp) == (0, None), p


def _planted(kind: str) -> list[tuple[CorpusScenario, dict[str, Any]]]:
    return [(s, a) for s in SCENARIOS for a in s.expected["anomalies"] if a["type"] == kind]


def _ids(pairs: list[tuple[CorpusScenario, dict[str, Any]]]) -> list[str]:
    return [f"{s.id}:{a.get('topic', '')}-{a.get('partition', '')}" for s, a in pairs]


OPEN = _planted("open_transaction")


@pytest.mark.parametrize(("scenario", "anomaly"), OPEN, ids=_ids(OPEN))
def test_a_crashed_producer_is_open_and_holds_the_lso(scans: OnDemand[Any], scenario: CorpusScenario,
                                                     anomaly: dict[str, Any]) -> None:
    result = scans[scenario.id]
    key = (anomaly["topic"], anomaly["partition"], anomaly["producer_id"], anomaly["producer_epoch"])
    kinds = {f.kind for f in result.findings
             if (f.topic, f.partition, f.producer_id, f.producer_epoch) == key}
    assert {"open_transaction", "stuck_lso"} <= kinds
    assert "hanging_transaction" not in kinds  # the coordinator lists the partition: long-running, not hanging
    name = f"{anomaly['topic']}-{anomaly['partition']}"
    broker = scenario.broker_offsets[name]
    (part,) = [p for p in result.partitions if (p.topic, p.partition) == key[:2]]
    assert part.held_records == data_records_between(scenario, name, part.last_stable_offset,
                                                     broker["high_watermark"]) > 0


DELETED_UNDER = [(s, a) for s, a in OPEN if "log_start_offset" in a]


@pytest.mark.parametrize(("scenario", "anomaly"), DELETED_UNDER, ids=_ids(DELETED_UNDER))
def test_records_deleted_under_an_open_transaction_are_said_once(scans: OnDemand[Any], scenario: CorpusScenario,
                                                                 anomaly: dict[str, Any]) -> None:
    """DeleteRecords moved the log start past an open transaction's first offset: the broker's
    log start; the transaction still open from its first offset; one incident that says its
    first records were deleted under it, where the LSO is held, and no remedy that contradicts it."""
    result = scans[scenario.id]
    name = f"{anomaly['topic']}-{anomaly['partition']}"
    (part,) = [p for p in result.partitions if f"{p.topic}-{p.partition}" == name]
    assert part.log_start_offset == anomaly["log_start_offset"] == scenario.broker_offsets[name]["log_start_offset"]
    assert part.culprit_first_offset == anomaly["first_offset"] < part.log_start_offset
    (incident,) = [i for i in result.incidents if name in i.partitions]
    first, start = anomaly["first_offset"], anomaly["log_start_offset"]
    assert f"its first records (offsets {first}-{start - 1} of {name}) were deleted while it was open" in incident.summary
    assert f"moved the log start offset to {start}" in incident.summary


TWO_PHASE = _planted("two_phase_commit_open")


@pytest.mark.parametrize(("scenario", "anomaly"), TWO_PHASE, ids=_ids(TWO_PHASE))
def test_a_two_phase_commit_transaction_is_told_from_a_crashed_producers(
        scans: OnDemand[Any], default_scans: OnDemand[Any], scenario: CorpusScenario, anomaly: dict[str, Any]) -> None:
    """KIP-939: the coordinator records its transaction.timeout.ms as 2147483647 and never aborts
    it; the finding says so, names what ends it (the external manager, else
    forceTerminateTransaction) and how long it has held the LSO, at any audit time; the ordinary
    transaction beside it, which the coordinator aborted at its timeout, leaves nothing."""
    for result in (scans[scenario.id], default_scans[scenario.id]):
        at = (anomaly["topic"], anomaly["partition"], anomaly["producer_id"])
        (opened,) = [f for f in result.findings if (f.topic, f.partition, f.producer_id) == at
                     and f.kind == "open_transaction"]
        assert opened.first_offset == anomaly["first_offset"]
        assert "two-phase-commit transaction" in opened.evidence and "never aborts it" in opened.evidence
        assert opened.remediation == ("kafka-transactions.sh --bootstrap-server <broker> forceTerminateTransaction "
                                      f"--transactionalId {anomaly['transactional_id']}")
        (incident,) = [i for i in result.incidents if i.incident_id == opened.incident_id]
        assert "held from read_committed consumers" in incident.summary
        assert "the coordinator aborts" not in incident.remediation
        assert [f for f in result.findings if f.kind == "hanging_transaction"] == []


PENDING = _planted("pending_offset_commit")


@pytest.mark.parametrize(("scenario", "anomaly"), PENDING, ids=_ids(PENDING))
def test_a_dead_eos_producer_leaves_a_pending_offset_commit(scans: OnDemand[Any], text_scans: OnDemand[Any],
                                                           scenario: CorpusScenario, anomaly: dict[str, Any]) -> None:
    for result in (scans[scenario.id], text_scans[scenario.id]):
        pending = [f for f in result.findings if f.kind == "pending_offset_commit"]
        assert pending and all(f.topic == "__consumer_offsets" for f in pending)
        assert any(anomaly["group"] in f.evidence for f in pending)


LATE = _planted("absorbed_late_record") + _planted("late_arrival_hanging")


@pytest.mark.parametrize(("scenario", "anomaly"), LATE, ids=_ids(LATE))
def test_a_late_batch_is_found_where_kafka_took_it(scans: OnDemand[Any], scenario: CorpusScenario,
                                                  anomaly: dict[str, Any]) -> None:
    """The batch the broker appended at ``first_offset`` after its transaction's marker (it said so
    in its ProduceResponse) is a late arrival; on late-0 the next transaction's marker absorbed it,
    on late-1 nothing closed it and find-hanging lists it."""
    at = (anomaly["topic"], anomaly["partition"])
    found = {f.kind for f in scans[scenario.id].findings
             if (f.topic, f.partition) == at and f.producer_id == anomaly["producer_id"]
             and (f.first_offset == anomaly["first_offset"] or f.kind == "absorbed_late_record")}
    assert "late_arrival" in found
    if anomaly["type"] == "absorbed_late_record":
        assert "absorbed_late_record" in found and "hanging_transaction" not in found
    else:
        assert "hanging_transaction" in found


# -- one cause, one incident -----------------------------------------------------------------------

@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_each_planted_anomaly_is_one_incident_and_nothing_else_is_loud(scans: OnDemand[Any],
                                                                      scenario: CorpusScenario) -> None:
    result = scans[scenario.id]
    down = scenario.stayed_down
    explained = set()
    for anomaly in scenario.expected["anomalies"]:
        if anomaly["type"] not in INCIDENT_CAUSES:
            continue
        hits = incidents_explaining(result, anomaly)
        assert [i.kind for i in hits] == [INCIDENT_CAUSES[anomaly["type"]]], (anomaly, [(i.kind, i.summary)
                                                                                         for i in hits])
        explained.add(hits[0].incident_id)
    loud = [(i.kind, i.summary) for i in result.incidents_at_or_above("warning")
            if i.incident_id not in explained
            and not (i.kind == "replica_divergence" and i.broker_id in down and i.severity == "warning")]
    assert loud == []
    assert {f.incident_id for f in result.findings} == {i.incident_id for i in result.incidents}


# -- a marker written again, and the epochs of known broker bugs -------------------------------------

DUPLICATES = _planted("duplicate_marker")


@pytest.mark.parametrize(("scenario", "anomaly"), DUPLICATES, ids=_ids(DUPLICATES))
def test_a_repeated_marker_is_one_incident_saying_what_it_ended(scans: OnDemand[Any], text_scans: OnDemand[Any],
                                                               scenario: CorpusScenario,
                                                               anomaly: dict[str, Any]) -> None:
    """The marker the broker wrote again at ``first_offset`` (it answered the raw WriteTxnMarkers
    without error) is one ``duplicate_marker`` incident there, naming the marker it repeats: info
    when nothing was open, a warning when it ended the producer's next transaction before that
    transaction's own decision, or when its result is the other one."""
    at = (anomaly["topic"], anomaly["partition"], anomaly["first_offset"])
    for result in (scans[scenario.id], text_scans[scenario.id]):
        (repeat,) = [f for f in result.findings
                     if f.kind == "duplicate_marker" and (f.topic, f.partition, f.first_offset) == at]
        assert (repeat.producer_id, repeat.producer_epoch) == (anomaly["producer_id"], anomaly["producer_epoch"])
        assert f"{anomaly['sent']} marker at offset {anomaly['first_offset']} of " in repeat.evidence
        assert f"repeats the {anomaly['marker_type']} marker at offset {anomaly['repeats_offset']} " in repeat.evidence
        flipped = anomaly["sent"] != anomaly["marker_type"]
        assert repeat.severity == ("warning" if anomaly["ended_open_transaction"] or flipped else "info")
        if flipped:  # an ABORT after the COMMIT: the records stay committed, whatever its sender believes
            assert "stay committed" in repeat.evidence
        (incident,) = [i for i in result.incidents if i.incident_id == repeat.incident_id]
        assert (incident.kind, incident.findings) == ("duplicate_marker", 1)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_only_a_marker_written_again_is_called_a_repeat(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """No other marker of real traffic is a repeat: commits and aborts, coordinator timeouts and
    fences, empty transactions, a coordinator's failover, TV2's epoch bumps and rotations."""
    planted = {(a["topic"], a["partition"], a["first_offset"]) for a in scenario.expected["anomalies"]
               if a["type"] == "duplicate_marker"}
    found = {(f.topic, f.partition, f.first_offset) for f in scans[scenario.id].findings
             if f.kind == "duplicate_marker"}
    assert found == planted


def _bumped_twice(records: list[CoordinatorRecord]) -> set[tuple[str | None, int | None, int | None]]:
    """Kafka 4.0.0's fence abort (KAFKA-19367), read off kafka-dump-log's text: a transactional id's
    Ongoing record at epoch e followed by its PrepareAbort at e+2, same producer id."""
    out: set[tuple[str | None, int | None, int | None]] = set()
    before: dict[str, CoordinatorRecord] = {}
    for r in records:
        p = before.get(r.transactional_id)
        if (p is not None and (p.state, r.state) == ("Ongoing", "PrepareAbort") and p.producer_id == r.producer_id
                and r.producer_epoch == p.producer_epoch + 2 and r.transaction_version in (None, 2)):
            out.add((r.transactional_id, r.partition, r.offset))
        before[r.transactional_id] = r
    return out


def _kept_at_last_epoch(records: list[CoordinatorRecord]) -> dict[tuple[str | None, int | None, int | None], str]:
    """Records of epoch 32767 that keep their producer id (Ongoing, Complete*) under transaction
    version 2, the first per producer id, read off kafka-dump-log's text; each with the
    severity due: info when the id has gone on under another producer id since."""
    now = {r.transactional_id: r.producer_id for r in records}  # each id's newest record
    out: dict[tuple[str | None, int | None, int | None], str] = {}
    seen: set[tuple[str, int]] = set()
    for r in records:
        if (r.producer_epoch == 32767 and r.transaction_version == 2
                and r.state in ("Ongoing", "CompleteCommit", "CompleteAbort")
                and (r.transactional_id, r.producer_id) not in seen):
            seen.add((r.transactional_id, r.producer_id))
            out[(r.transactional_id, r.partition, r.offset)] = (
                "info" if now[r.transactional_id] != r.producer_id else "warning")
    return out


def test_the_corpus_holds_both_sides_of_each_epoch_bug() -> None:
    """Real brokers of the affected releases left each signature, those of the fixed ones did not."""
    by_id = {s.id: coordinator_records(s) for s in SCENARIOS
             if s.name in ("fenced-zombie", "epoch-exhaustion-abort", "epoch-rotation")}
    assert _bumped_twice(by_id["4.0.0/fenced-zombie"])
    assert not _bumped_twice(by_id["4.0.2/fenced-zombie"])
    assert _kept_at_last_epoch(by_id["4.1.2/epoch-exhaustion-abort"])
    assert not _kept_at_last_epoch(by_id["4.4.0/epoch-exhaustion-abort"])
    assert not any(_kept_at_last_epoch(by_id[f"{v}/epoch-rotation"]) for v in ("4.0.2", "4.1.2", "4.4.0"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_epoch_bugs_are_found_where_the_coordinator_log_shows_them(scans: OnDemand[Any], text_scans: OnDemand[Any],
                                                                   scenario: CorpusScenario) -> None:
    """``epoch_bumped_twice`` and ``epoch_exhausted`` name exactly the coordinator records that
    kafka-dump-log prints with those signatures, each its own incident of its kind."""
    records = coordinator_records(scenario)
    twice, kept = _bumped_twice(records), _kept_at_last_epoch(records)
    for result in (scans[scenario.id], text_scans[scenario.id]):
        def place(f: Any) -> tuple[str | None, int | None, int | None]:
            return f.transactional_id, f.partition, f.first_offset

        assert {place(f) for f in result.findings if f.kind == "epoch_bumped_twice"} == twice
        exhausted = {place(f): f.severity for f in result.findings if f.kind == "epoch_exhausted"}
        assert exhausted == kept
        for f in result.findings:
            if f.kind in ("epoch_bumped_twice", "epoch_exhausted"):
                (incident,) = [i for i in result.incidents if i.incident_id == f.incident_id]
                assert (incident.kind, incident.findings) == (f.kind, 1)


# -- clusters of three brokers: every copy audited, the leader's speaking -------------------------

CLUSTERS = [s for s in SCENARIOS if s.brokers > 1]


@pytest.mark.parametrize("scenario", CLUSTERS, ids=[s.id for s in CLUSTERS])
def test_the_leaders_copy_speaks_and_every_copy_is_audited(scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """On KRaft clusters the copy audited is the leader's the cluster reported; on ZooKeeper ones
    (no metadata log in the log dirs) it holds what the leader's copy holds. Every copy is audited,
    none beyond its own log end."""
    result = scans[scenario.id]
    kraft = scenario.expected["mode"].startswith("KRaft")
    for name, live in scenario.expected["partitions"].items():
        copies = [r for r in result.replicas if (r.topic, r.partition) == (live["topic"], live["partition"])]
        assert len(copies) == scenario.copies(name), name  # every broker's copy
        (chosen,) = [r for r in copies if r.chosen]
        (leader,) = [r for r in copies if r.broker_id == live["leader"]]
        if kraft:
            assert chosen.broker_id == live["leader"], name
            assert chosen.metadata_leader == live["leader"] and chosen.in_isr, name
        keys = ("log_end_offset", "high_watermark", "last_stable_offset", "open_transactions")
        assert {k: getattr(chosen, k) for k in keys} == {k: getattr(leader, k) for k in keys}, name
        for r in copies:
            assert r.high_watermark is None or r.high_watermark <= r.log_end_offset, (name, r.broker_id)
            assert r.last_stable_offset <= r.log_end_offset, (name, r.broker_id)


@pytest.mark.parametrize("scenario", CLUSTERS, ids=[s.id for s in CLUSTERS])
def test_only_a_broker_that_stayed_down_lags_and_no_copy_conflicts(scans: OnDemand[Any],
                                                                   scenario: CorpusScenario) -> None:
    """A killed follower restarted and caught up: its copies agree. A broker that stayed down
    (a killed coordinator, the old leader of an unclean election): its copies may lack what the
    others wrote since (``behind``); only an unclean election's partition holds other batches
    than the leader's (``conflict``), from the offset the new leader's history parts from."""
    result = scans[scenario.id]
    differing = [r for r in result.replicas if r.divergence is not None]
    down = scenario.stayed_down
    unclean = {(a["topic"], a["partition"]): a for a in scenario.expected["anomalies"]
               if a["type"] == "diverged_replicas"}
    if scenario.name == "follower-killed":
        assert differing == []
    else:
        for r in differing:
            (chosen,) = [c for c in result.replicas if c.chosen and (c.topic, c.partition) ==
                         (r.topic, r.partition)]
            assert r.broker_id in down, r
            if (r.topic, r.partition) in unclean:
                planted = unclean[(r.topic, r.partition)]
                assert (r.divergence, r.divergent_offset, chosen.broker_id) == (
                    "conflict", planted["diverged_from"], planted["stale_leader"])
            else:
                assert r.divergence == "behind"
                assert r.log_end_offset < chosen.high_watermark and r.divergent_offset == r.log_end_offset
        assert {(r.topic, r.partition) for r in differing if r.divergence == "conflict"} == set(unclean)
        found = {(f.topic, f.partition, f.broker_id) for f in result.findings
                 if f.kind == "replica_divergence"}
        assert found == {(r.topic, r.partition, r.broker_id) for r in differing}


# -- consumer groups blocked by a held LSO ------------------------------------------------------------

GROUPS = [s for s in SCENARIOS if "consumer_groups" in s.expected]


def _blocked_by_the_tool(scenario: CorpusScenario) -> set[tuple[str, str, int, int, int]]:
    """What ``kafka-consumer-groups.sh --describe --all-groups`` listed while the broker ran (group,
    topic, partition, CURRENT-OFFSET, LAG), on the partitions whose LSO the broker reported below
    its HW then, where CURRENT-OFFSET is at or below that LSO."""
    partitions = scenario.expected["partitions"]
    blocked = set()
    for row in scenario.expected["consumer_groups"]["rows"]:
        broker = partitions[f"{row['TOPIC']}-{row['PARTITION']}"]
        committed = int(row["CURRENT-OFFSET"])
        if broker["last_stable_offset"] < broker["high_watermark"] and committed <= broker["last_stable_offset"]:
            blocked.add((row["GROUP"], row["TOPIC"], int(row["PARTITION"]), committed, int(row["LAG"])))
    return blocked


@pytest.mark.parametrize("scenario", GROUPS, ids=[s.id for s in GROUPS])
def test_blocked_consumer_groups_are_those_kafka_consumer_groups_shows_at_the_lso(
        scans: OnDemand[Any], text_scans: OnDemand[Any], scenario: CorpusScenario) -> None:
    """The groups txn-audit reports blocked, from ``__consumer_offsets`` (log dirs and
    ``kafka-dump-log --offsets-decoder`` text alike), are the rows kafka-consumer-groups printed at
    or below a held LSO, with its committed offset and lag; the read_uncommitted group, past the
    LSO, and the deleted group are not among them; the incident names them."""
    theirs = _blocked_by_the_tool(scenario)
    uncommitted = {e["group"] for e in scenario.expected["group_commits"] if e["isolation"] == "read_uncommitted"}
    assert theirs and uncommitted and not {g for g, *_ in theirs} & uncommitted
    for result in (scans[scenario.id], text_scans[scenario.id]):
        ours = {(b.group_id, b.topic, b.partition, b.committed_offset, b.records_behind)
                for b in result.blocked_consumers}
        assert ours == theirs
        for b in result.blocked_consumers:
            (part,) = [p for p in result.partitions if (p.topic, p.partition) == (b.topic, b.partition)]
            assert (b.last_stable_offset, b.high_watermark) == (part.last_stable_offset, part.high_watermark)
            assert b.time_behind_from == "held_transaction"
            assert b.time_behind_ms == scenario.as_of_ms - part.held_since_timestamp > 0
            (incident,) = [i for i in result.incidents if f"{b.topic}-{b.partition}" in i.partitions]
            assert f"{b.group_id} on {b.topic}-{b.partition} (committed offset {b.committed_offset}" in incident.summary
        summary = result.to_json()
        assert {(b["group_id"], b["committed_offset"]) for b in summary["blocked_consumers"]} == \
            {(g, offset) for g, _, _, offset, _ in theirs}
        assert summary["summary"]["consumer_groups_blocked"] == len({g for g, *_ in theirs})
