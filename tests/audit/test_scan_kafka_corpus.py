"""Scan verdicts on the committed real-broker corpus of every Kafka release, against what the live
brokers and Kafka's own tools said (``tests/corpus``, written by ``make kafka-corpus``).

For every scenario of every release: the scan of the log dirs gives each partition's high
watermark, last stable offset and log start offset as the broker reported them, and exactly
the transactions ``kafka-transactions.sh find-hanging`` listed (judged as the tool judged them:
at its run time, with its one-minute timeout); the scan of the ``kafka-dump-log`` text of the
same files gives the same findings and last stable offsets as the binary scan.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.kafkacorpus import CorpusScenario, scenarios

pytestmark = [pytest.mark.spark]

ONE_MINUTE = 60_000
SCENARIOS = scenarios()
IDS = [s.id for s in SCENARIOS]
SINGLE = [s for s in SCENARIOS if s.brokers == 1]


def _scan(spark: Any, scenario: CorpusScenario, *, text: bool) -> Any:
    from txn_audit import api

    source = scenario.folder / ("tools" if text else "logdirs")
    return api.scan(source, spark=spark, as_of_ms=scenario.as_of_ms, max_transaction_timeout_ms=ONE_MINUTE,
                    progress=False, quality=not text, report=False, **({"input_kind": "text"} if text else {}))


@pytest.fixture(scope="module")
def scans(spark: Any) -> dict[str, Any]:
    return {s.id: _scan(spark, s, text=False) for s in SCENARIOS}


@pytest.fixture(scope="module")
def text_scans(spark: Any) -> dict[str, Any]:
    return {s.id: _scan(spark, s, text=True) for s in SINGLE}


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
def test_hw_lso_and_log_start_equal_the_brokers(scans: dict[str, Any], scenario: CorpusScenario) -> None:
    ours = {f"{p['topic']}-{p['partition']}": p for p in scans[scenario.id].partitions}
    for name, broker in scenario.broker_offsets.items():
        got = {k: ours[name][k] for k in ("high_watermark", "last_stable_offset", "log_start_offset")}
        want = {k: broker[k] for k in ("high_watermark", "last_stable_offset", "log_start_offset")}
        assert got == want, name


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s.find_hanging_rows is not None],
                         ids=[s.id for s in SCENARIOS if s.find_hanging_rows is not None])
def test_hanging_set_equals_find_hanging(scans: dict[str, Any], scenario: CorpusScenario) -> None:
    ours = {
        (f["topic"], f["partition"], f["producer_id"], f["producer_epoch"], f["first_offset"])
        for f in scans[scenario.id].findings
        if f["kind"] == "hanging_transaction"
    }
    assert ours == scenario.find_hanging_rows


def _finding_keys(result: Any) -> list[tuple[Any, ...]]:
    fields = ("kind", "severity", "topic", "partition", "producer_id", "producer_epoch", "transactional_id",
              "first_offset", "last_offset", "first_timestamp_ms", "last_timestamp_ms")
    # invariant_violation comes from the data-quality suites, which the text scans skip
    return sorted((tuple(f[k] for k in fields) for f in result.findings if f["kind"] != "invariant_violation"),
                  key=repr)


@pytest.mark.parametrize("scenario", SINGLE, ids=[s.id for s in SINGLE])
def test_text_dump_gives_the_same_findings_and_lso(
    scans: dict[str, Any], text_scans: dict[str, Any], scenario: CorpusScenario
) -> None:
    assert _finding_keys(text_scans[scenario.id]) == _finding_keys(scans[scenario.id])
    binary = {(p["topic"], p["partition"]): p for p in scans[scenario.id].partitions}
    text = {(p["topic"], p["partition"]): p for p in text_scans[scenario.id].partitions}
    assert set(text) == {k for k in binary if k[0] != "__cluster_metadata"}
    for key, p in text.items():
        assert p["last_stable_offset"] == binary[key]["last_stable_offset"], key
    # the HW of the data partitions comes from the offsets the live broker gave (tools/offsets.json)
    for name, broker in scenario.expected["partitions"].items():
        p = text[(broker["topic"], broker["partition"])]
        assert (p["high_watermark"], p["hw_source"]) == (broker["high_watermark"], "offsets_file"), name
