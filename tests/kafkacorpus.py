"""The committed real-broker corpus (``tests/corpus/kafka-<version>/<scenario>/``).

Written by ``make kafka-corpus`` (``tools/realkafka``): each folder holds a real cluster's log
dirs, what Kafka's own tools said while it ran (``tools/``) and ``expected.json``. The tests
here only read it; the values they compare with come from the brokers and their tools.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parent / "corpus"


@dataclass(frozen=True)
class CorpusScenario:
    version: str
    name: str
    folder: Path

    @property
    def id(self) -> str:
        return f"{self.version}/{self.name}"

    @cached_property
    def expected(self) -> dict[str, Any]:
        return dict(json.loads((self.folder / "expected.json").read_text()))

    @property
    def brokers(self) -> int:
        return len(self.expected["brokers"])

    @property
    def as_of_ms(self) -> int:
        """When find-hanging ran (the newest tool run where the release has no find-hanging)."""
        fh = self.expected.get("find_hanging")
        if fh:
            return int(fh["at_ms"])
        return max(int(c["at_ms"]) for c in self.expected["tool_commands"])

    def copies(self, partition: str) -> int:
        """How many brokers' log dirs hold a copy of ``partition`` (``topic-N``)."""
        logdirs = self.folder / "logdirs"
        return sum(1 for _ in logdirs.glob(f"broker-*/{partition}")) or int((logdirs / partition).is_dir())

    @property
    def stayed_down(self) -> set[int]:
        """The brokers that were down when the copy was taken (killed and not restarted)."""
        down = {a["down"] for a in self.expected["anomalies"] if "down" in a}
        killed = self.expected.get("killed_broker")
        return down | ({killed} if killed is not None else set())

    @property
    def broker_offsets(self) -> dict[str, dict[str, Any]]:
        """HW, LSO and log start per partition as the live broker gave them last, before shutdown."""
        return dict(self.expected["partitions_after_find_hanging_wait"])

    @property
    def find_hanging_rows(self) -> set[tuple[str, int, int, int, int]] | None:
        fh = self.expected.get("find_hanging")
        if not fh:
            return None
        return {(r["Topic"], int(r["Partition"]), int(r["ProducerId"]), int(r["ProducerEpoch"]), int(r["StartOffset"]))
                for r in fh["rows"]}


def scenarios() -> list[CorpusScenario]:
    out = []
    for version_dir in sorted(CORPUS.glob("kafka-*")):
        for folder in sorted(version_dir.iterdir()):
            if (folder / "expected.json").is_file():
                out.append(CorpusScenario(version_dir.name.removeprefix("kafka-"), folder.name, folder))
    return out


#: the cause of each anomaly a scenario plants; the others (a coordinator's timeout abort, a killed
#: coordinator) are Kafka working as designed: no incident at warning or above
INCIDENT_CAUSES = {
    "absorbed_late_record": "late_arrival",
    "late_arrival_hanging": "late_arrival",
    "open_transaction": "open_transaction",
    "open_transaction_long_running": "open_transaction",
    "hanging_transaction": "stray_write",  # a partition never added to the transaction
    "pending_offset_commit": "open_transaction",  # the EOS producer died inside its transaction
    "duplicate_marker": "duplicate_marker",  # a marker written again (a coordinator's resend)
    "diverged_replicas": "replica_divergence",  # an unclean election: copies hold different batches
    "two_phase_commit_open": "open_transaction",  # KIP-939: only its external manager (or a force) ends it
}

#: anomalies that can be harmless: their incident may be at info (a repeated marker that ended nothing)
QUIET_CAUSES = frozenset({"duplicate_marker"})


def incidents_explaining(result: Any, anomaly: dict[str, Any]) -> list[Any]:
    """The incidents that explain ``anomaly``: at its partition (and first offset, where it has
    one), at warning or above unless it can be harmless (``QUIET_CAUSES``), or for a pending
    offset commit, the one holding it."""
    if anomaly["type"] == "pending_offset_commit":
        return [i for i in result.incidents if "pending_offset_commit" in i.consequences]
    at = f"{anomaly['topic']}-{anomaly['partition']}"
    floor = "info" if anomaly["type"] in QUIET_CAUSES else "warning"
    return [i for i in result.incidents if at in i.partitions and i.severity >= floor
            and ("first_offset" not in anomaly or any(f.first_offset == anomaly["first_offset"]
                                                      for f in result.findings_of(i)))]


def data_records_between(scenario: CorpusScenario, partition: str, first: int, end: int) -> int:
    """How many data records (not markers) ``kafka-dump-log`` printed with an offset in
    [``first``, ``end``) for the partition's copy on its leader: the records an LSO at ``first``
    holds back from a HW at ``end``."""
    from tests.realcorpus import parse_dump_log

    live = scenario.expected["partitions"][partition]
    dumps = scenario.folder / "tools" / "dump-log"
    text = dumps / f"{partition}.txt"
    if not text.is_file():
        text = dumps / f"broker-{live['leader']}" / f"{partition}.txt"
    return sum(1 for dumped in parse_dump_log(text.read_text()) for batch in dumped.batches
               if batch.fields.get("isControl") == "false"
               for record in batch.records if first <= int(record["offset"]) < end)


#: ``transactionStatus`` as 4.1's kafka-dump-log prints it (a number) to the state's name
_STATUS = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit", 5: "CompleteAbort",
           6: "Dead", 7: "PrepareEpochFence"}
_OFFSET = re.compile(r"^\| offset: (\d+) .*?key: (.*?) payload: (.*)$")
_TEXT_KEY = re.compile(r"transactionalId=(.+)$")
_TEXT_VALUE = re.compile(r"^producerId:(-?\d+),producerEpoch:(-?\d+),state=(\w+),")


@dataclass(frozen=True)
class CoordinatorRecord:
    """One ``__transaction_state`` record as ``kafka-dump-log.sh --transaction-log-decoder``
    printed it: the pre-4.1 text form or the JSON form (whose status 4.1 prints as a number).
    ``transaction_version`` is None where the text does not print it."""

    partition: int
    offset: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    next_producer_id: int
    transaction_version: int | None


def coordinator_records(scenario: CorpusScenario) -> list[CoordinatorRecord]:
    """Every record of the scenario's coordinator log, once (the copies of a cluster's brokers
    hold the same records), in log order per partition."""
    found: dict[tuple[int, int], CoordinatorRecord] = {}
    for dump in sorted((scenario.folder / "tools" / "dump-log").rglob("__transaction_state-*.txt")):
        partition = int(dump.stem.rsplit("-", 1)[1])
        for line in dump.read_text().splitlines():
            m = _OFFSET.match(line)
            if m is None or m.group(3) == "<DELETE>":
                continue
            offset, key, payload = int(m.group(1)), m.group(2), m.group(3)
            if payload.startswith("{"):
                data = json.loads(payload)["data"]
                status = data["transactionStatus"]
                record = CoordinatorRecord(
                    partition, offset, json.loads(key)["data"]["transactionalId"], int(data["producerId"]),
                    int(data["producerEpoch"]), _STATUS[status] if isinstance(status, int) else str(status),
                    int(data.get("nextProducerId", -1)), int(data.get("clientTransactionVersion", 0)))
            else:
                k, v = _TEXT_KEY.search(key), _TEXT_VALUE.match(payload)
                if k is None or v is None:
                    continue
                record = CoordinatorRecord(partition, offset, k.group(1), int(v.group(1)), int(v.group(2)),
                                           v.group(3), -1, None)
            found[(partition, offset)] = record
    return [found[k] for k in sorted(found)]
