"""``SCENARIOS.md`` of the corpus: what each folder holds and what Kafka said of it, written from
the folders' ``expected.json`` and the scenario definitions (rewritten after every harness run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.realkafka.dist import Dist, cache_root, version_tuple
from tools.realkafka.scenarios import SCENARIOS

__all__ = ["write_index"]

INTRO = """# Real-broker corpus

Every folder `kafka-<version>/<scenario>/` was written by `make kafka-corpus` (`tools/realkafka`)
against **real Apache Kafka brokers** of that release, fetched from Maven Central
(`org.apache.kafka:kafka_2.13` and `kafka-tools`), formatted fresh for the scenario and run on
127.0.0.1 only: KRaft with combined broker+controller nodes from 3.6, ZooKeeper for 2.8. The clients
are Kafka's own Java client of the same release (`tools/realkafka/driver/TxnDriver.java`) and, for
what no real client sends, raw requests built with kafka-python's protocol classes
(`tools/realkafka/stray.py`): a ProduceRequest v3 (a transactional batch to a partition never
added, a batch created before its marker) and a WriteTxnMarkers request (a marker written again,
as a coordinator's retry writes it). Regenerate one folder with
`make kafka-corpus KAFKA_VERSIONS=<version> SCENARIOS=<scenario>`.

Layout of each folder (the layout of the 3.6.2 corpus in `../shared/realcorpus`):

| path | what |
| --- | --- |
| `logdirs/` | the brokers' `log.dirs` copied after they stopped (SIGTERM; SIGKILL where the scenario kills one): one `logdirs/broker-<id>/` per broker in clusters of 3. Left out: `.lock`, and `__cluster_metadata-0`'s `.index`/`.timeindex` (4.x brokers leave them at their preallocated 10 MiB of zeros). |
| `tools/offsets.json` | per partition (data and internal topics): `high_watermark` (Admin `listOffsets` latest, read_uncommitted), `last_stable_offset` (latest, read_committed) and `log_start_offset` (earliest), read from the live cluster after the scenario. |
| `tools/kafka-transactions-*.txt` | `kafka-transactions.sh` `list`, `describe` of each id, `describe-producers` of each data partition, `find-hanging --broker-id <live broker> --max-transaction-timeout 1` (run by the tool's main class from the release's jars; 3.0 and newer), each with its command line, exit code and time. |
| `tools/kafka-consumer-groups-describe.txt` | `kafka-consumer-groups.sh --describe --all-groups` where the scenario has consumer groups (`blocked-consumers`): each group's committed offset (`CURRENT-OFFSET`), the log end offset and the lag per partition, run as the other tools are. |
| `tools/kafka-features-describe.txt` | `kafka-features.sh describe` (KRaft): the finalized `transaction.version` among others. |
| `tools/dump-log/[broker-<id>/]<partition>.txt` | `kafka-dump-log.sh --print-data-log` over every copied `.log`, `.snapshot` and `.txnindex` of the partition (`--deep-iteration` for data, `--transaction-log-decoder` for `__transaction_state`, `--offsets-decoder` for `__consumer_offsets`); for `__cluster_metadata-0` (KRaft), over its `.log` and `.checkpoint` files (the metadata log and its snapshots) with `--cluster-metadata-decoder`. |
| `tools/broker-server-log-excerpt*.txt` | the broker's `server.log` lines about transactions, producers, markers, segment rolls, warnings and errors. |
| `expected.json` | release, features, broker settings, transactional ids as `list`/`describe` gave them, HW/LSO/log start per partition (`partitions`: once the offsets stopped moving, when the tools ran; `partitions_after_find_hanging_wait`: again after find-hanging, just before the brokers stopped), the find-hanging rows, every tool command with its time, the planted anomalies and the raw produce's request and answer; `consumer_groups`: the rows `kafka-consumer-groups.sh` printed, where it ran. |

Common settings: `transaction.state.log.num.partitions=3`, `offsets.topic.num.partitions=2`,
segments of 64 KiB (1 MiB from 4.0, its minimum), replication factor 1 (3 in the 3-broker
scenarios), `auto.create.topics.enable=false`. Producer ids are small because every cluster is new.
Where a scenario waits for find-hanging (`--max-transaction-timeout` is whole minutes), the tools
run 65 s after the last write.
"""


def _verdict(expected: dict[str, Any]) -> str:
    held = [f"{name} LSO {p['last_stable_offset']} < HW {p['high_watermark']}"
            for name, p in sorted(expected["partitions_after_find_hanging_wait"].items())
            if p["last_stable_offset"] < p["high_watermark"]]
    fh = expected.get("find_hanging")
    if fh is None:
        hanging = "find-hanging: no such tool in this release"
    elif fh["rows"]:
        hanging = "find-hanging: " + "; ".join(f"{r['Topic']}-{r['Partition']} pid {r['ProducerId']} epoch "
                                              f"{r['ProducerEpoch']} start {r['StartOffset']}" for r in fh["rows"])
    else:
        hanging = "find-hanging: nothing"
    # data partitions whose log start moved (DeleteRecords, retention), and what the cleaner checkpointed
    moved = [f"{name} log start {p['log_start_offset']}"
             for name, p in sorted(expected["partitions_after_find_hanging_wait"].items())
             if p["log_start_offset"] > 0 and not name.startswith("__")]
    cleaner = expected.get("cleaner_offset_checkpoint")
    cleaned = []
    if cleaner:
        for broker, offsets in sorted(cleaner.items()):
            shown = ", ".join(f"{name} {offset}" for name, offset in sorted(offsets.items()))
            cleaned.append(f"cleaner-offset-checkpoint{'' if len(cleaner) == 1 else ' of broker ' + broker}: "
                           + (shown or "empty"))
    groups = expected.get("consumer_groups")
    described = [] if groups is None else ["kafka-consumer-groups: " + "; ".join(
        f"{r['GROUP']} {r['TOPIC']}-{r['PARTITION']} at {r['CURRENT-OFFSET']} (lag {r['LAG']})"
        for r in groups["rows"])]
    return "; ".join([*(held or ["LSO = HW everywhere"]), *moved, hanging, *cleaned, *described])


#: releases outside the harness's default ones, kept for the known bug their scenarios show
KNOWN_BUG_RELEASES = {
    "4.0.0": "Kept for one scenario: when InitProducerId fences an open transaction, this release's coordinator "
             "bumps the epoch twice (KAFKA-19367, fixed in 4.0.1; compare `kafka-4.0.2/fenced-zombie`). Regenerate "
             "with `make kafka-corpus KAFKA_VERSIONS=4.0.0 SCENARIOS=fenced-zombie`.",
}


def write_index(corpus: Path) -> Path:
    lines = [INTRO, "## Scenarios\n"]
    lines += ["| scenario | what it plants |", "| --- | --- |"]
    lines += [f"| `{s.name}` | {s.summary} |" for s in SCENARIOS.values()]
    versions = sorted((p for p in corpus.glob("kafka-*") if p.is_dir()),
                      key=lambda p: version_tuple(p.name.removeprefix("kafka-")))
    for vdir in versions:
        version = vdir.name.removeprefix("kafka-")
        lines += ["", f"## Kafka {version}", ""]
        if version in KNOWN_BUG_RELEASES:
            lines += [KNOWN_BUG_RELEASES[version], ""]
        lines += ["| scenario | TV | what happened | Kafka's own verdict |", "| --- | --- | --- | --- |"]
        for s in SCENARIOS.values():
            folder = vdir / s.name
            if version in KNOWN_BUG_RELEASES and not folder.is_dir():
                continue
            if (folder / "expected.json").is_file():
                e = json.loads((folder / "expected.json").read_text())
                lines.append(f"| `{s.name}` | {e.get('transaction_version')} | {e['description']} | {_verdict(e)} |")
            else:
                why = s.unsupported(Dist(version=version, home=cache_root() / version)) or "not generated"
                lines.append(f"| `{s.name}` | | not in the corpus: {why} | |")
    path = corpus / "SCENARIOS.md"
    path.write_text("\n".join(lines) + "\n")
    return path
