"""The rules of the coordinator log's own records, computed on the driver with pyarrow (no
pyspark here): epoch bumps that known broker bugs leave under transaction version 2,
``epoch_bumped_twice`` (KAFKA-19367) and ``epoch_exhausted`` (KAFKA-20090).

Their rows are the coordinator pass's candidates (``CoordinatorLog.epoch_candidates``): the
records of the last epoch or two above the id's previous record, each with that previous record
and the id's producer id now. A log has none, or a few per id that met the bug: they are
collected once (``detect.detection_rules``) rather than judged by a Spark query with a window
and a place in the gates' query.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from txn_audit.detect.words import finding_row
from txn_audit.formats.model import LAST_PRODUCER_EPOCH
from txn_audit.schemas import FINDINGS, in_ms
from txn_audit.severity import Severity

__all__ = ["coordinator_epoch_findings", "coordinator_rule_findings"]

#: the coordinator states whose record at the last epoch shows the producer id kept (a commit at
#: the last epoch completes under the new producer id, at epoch 0; its Prepare* at 32767 names
#: no next producer id on the releases up to 4.4)
KEEPS_ID = ("Ongoing", "CompleteCommit", "CompleteAbort")


def _bumped_twice(row: dict[str, Any]) -> bool:
    """The abort of an open transaction (Ongoing at epoch e) recorded at e+2 (PrepareAbort) by the
    same producer id. A text dump before Kafka 4.1 does not print the version: version 1 never
    bumps twice in the releases audited (since 2.5, KAFKA-9666), so an unknown version counts as 2."""
    version, epoch, before = row["client_transaction_version"], row["producer_epoch"], row["prev_producer_epoch"]
    return ((version is None or version >= 2) and row["prev_state"] == "Ongoing" and row["state"] == "PrepareAbort"
            and row["producer_id"] is not None and row["prev_producer_id"] == row["producer_id"]
            and epoch is not None and before is not None and epoch == before + 2)


def _exhausted(row: dict[str, Any]) -> bool:
    """An Ongoing or Complete* record of the last epoch that keeps its producer id. Under version 1
    an abort at the last epoch keeps the producer id by design (the retried InitProducerId gets a
    new one): only a known version 2 says so."""
    version = row["client_transaction_version"]
    return (version is not None and version >= 2 and row["producer_epoch"] == LAST_PRODUCER_EPOCH
            and row["state"] in KEEPS_ID)


def _place(row: dict[str, Any]) -> tuple[int, int]:
    """A record's place in the coordinator log, in order (an absent value first)."""
    partition, offset = row["partition"], row["offset"]
    return (-1 if partition is None else partition, -1 if offset is None else offset)


def coordinator_epoch_findings(candidates: pa.Table) -> list[dict[str, Any]]:
    """Epoch bumps the coordinator log shows that known broker bugs leave, under transaction
    version 2 (the record's ``client_transaction_version``). Each finding is placed on the
    coordinator record that shows it (``__transaction_state``, partition and offset):

    * ``epoch_bumped_twice``: the abort of an open transaction (Ongoing at epoch e) recorded at
      epoch e+2 (PrepareAbort): InitProducerId's fence bumped the epoch and the abort bumped it
      again (Kafka 4.0.0, KAFKA-19367, fixed in 4.0.1). Harmless by itself, but from epoch 32766
      the second bump overflows and the id can no longer be fenced.
    * ``epoch_exhausted``: an Ongoing or Complete* record of epoch 32767, which keeps its
      producer id, one finding per producer id (its first such record). A commit at the last
      epoch completes under a new producer id at epoch 0; a fence or timeout abort did not
      before Kafka 4.3.0 (KAFKA-20090): the abort completes at 32767 under the old producer id,
      and a client still running can leave the id's next transaction stuck in Ongoing. A new
      InitProducerId gets a new producer id.

    The records of the two kinds are apart (PrepareAbort; Ongoing or Complete*), so each flagged
    record is one finding of one kind. ``candidates``: ``CoordinatorLog.epoch_candidates`` rows.
    """
    found = []
    first_exhausted: dict[tuple[Any, Any], dict[str, Any]] = {}
    for row in sorted(candidates.to_pylist(), key=_place):
        here = f"__transaction_state-{row['partition']} offset {row['offset']}"
        tid, pid, epoch = row["transactional_id"], row["producer_id"], row["producer_epoch"]
        if _bumped_twice(row):
            evidence = (
                f"transactional id {tid} (producer {pid}): the abort of its open transaction of epoch "
                f"{row['prev_producer_epoch']} (Ongoing at __transaction_state-{row['partition']} offset "
                f"{row['prev_offset']}) is recorded with epoch {epoch} (PrepareAbort at {here}), two bumps instead of "
                "one: InitProducerId's fence bumped the epoch and the abort bumped it again, as Kafka 4.0.0 does "
                "under transaction version 2 (KAFKA-19367, fixed in 4.0.1); harmless here, but from epoch 32766 the "
                "second bump overflows and the id can no longer be fenced"
            )
            severity = Severity.WARNING if epoch >= LAST_PRODUCER_EPOCH - 1 else Severity.INFO
            found.append(finding_row(row, "epoch_bumped_twice", severity, evidence, producer_epoch=epoch,
                                     first_offset=row["offset"], last_offset=row["offset"],
                                     first_timestamp=row["txn_last_update_timestamp"]))
        elif _exhausted(row) and (tid, pid) not in first_exhausted:
            first_exhausted[(tid, pid)] = row
            now = row["now_producer_id"]
            moved_on = now is not None and pid is not None and now != pid
            then = (f"the id has since gone on under producer {now} (a new InitProducerId)" if moved_on
                    else "it is still the id's producer id: its client cannot bump the epoch again")
            evidence = (
                f"transactional id {tid} reached epoch 32767, the last of producer {pid}, and the coordinator kept "
                f"that producer id ({row['state']} at {here}): a commit at the last epoch completes under a new "
                "producer id, an abort did not before Kafka 4.3.0 (KAFKA-20090), which can leave the id's next "
                f"transaction stuck in Ongoing; {then}"
            )
            found.append(finding_row(row, "epoch_exhausted", Severity.INFO if moved_on else Severity.WARNING,
                                     evidence, producer_epoch=epoch, first_offset=row["offset"],
                                     last_offset=row["offset"], first_timestamp=row["txn_last_update_timestamp"]))
    return found


def coordinator_rule_findings(candidates: pa.Table) -> pa.Table:
    """Every finding of the rules of this module, as a ``FINDINGS`` table (no row: none)."""
    return pa.Table.from_pylist(coordinator_epoch_findings(candidates), schema=in_ms(FINDINGS))
