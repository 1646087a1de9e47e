"""The committed real-broker corpus (``tests/corpus/kafka-<version>/<scenario>/``).

Written by ``make kafka-corpus`` (``tools/realkafka``): each folder holds a real cluster's log
dirs, what Kafka's own tools said while it ran (``tools/``) and ``expected.json``. The tests
here only read it; the values they compare with come from the brokers and their tools.
"""

from __future__ import annotations

import json
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
}


def incidents_explaining(result: Any, anomaly: dict[str, Any]) -> list[Any]:
    """The incidents that explain ``anomaly``: at its partition (and first offset, where it has
    one), or for a pending offset commit, the one holding it."""
    if anomaly["type"] == "pending_offset_commit":
        return [i for i in result.incidents if "pending_offset_commit" in i.consequences]
    at = f"{anomaly['topic']}-{anomaly['partition']}"
    return [i for i in result.incidents if at in i.partitions and i.severity >= "warning"
            and ("first_offset" not in anomaly or any(f.first_offset == anomaly["first_offset"]
                                                      for f in result.findings_of(i)))]
