"""Rebuild transactions from the raw tables: DataFrame in, DataFrame out. The driver holds only
few rows: the chosen replicas (one per partition, ``replicas.ranked_replicas``), each
transactional id's newest coordinator record and each producer id's transactional id (a row per
id, ``transactions.CoordinatorLog``), the ``transactions`` table (a row per producer id,
``producer_summary``), which it builds with pyarrow from ``partition_transactions``' rows read a
batch at a time, and each replica's stability (``stability``), from the same rows' few open or
unreplicated transactions.

The raw tables come as ``tables.RawTables``: a frame per table and the manifest of the files
ingest wrote (``txn_audit.manifest``). The producer pass reads the files with pyarrow, one
replica per task (``pass_files``, run by ``replica_tasks``); its tasks also write
``partition_transactions`` themselves (``transaction_files``) and say what follows each
Prepare* record on their partition (``prepare_follows``), and each partition's extent is read
from the manifest. The coordinator log is read the same way, a partition per task
(``coordinator_pass``, ``transactions.CoordinatorLog``): its Prepare* records, each id's newest
record and each producer id's transactional id in one pass. Where the derived tables go is
``DerivedOutput``'s to say; the Prepare* records go from the coordinator pass's tasks to the
producer pass's, and what follows them from there to the rules, as files in its work folder
(``DerivedOutput.work_dir``), never through Spark.

When a partition has several copies (a dump of several brokers), one speaks for it
(``replica_choice``: the KRaft metadata log's leader, else the highest leader epoch, then the
longest log); every other copy is audited on its own data too and compared with it
(``replica_stability``, ``divergence``).

``partition_transactions``: one row per transaction per partition, from the producer's data
batches and markers in offset order. ``transactions``: those per producer id, against the
replayed coordinator log. ``partition_stability``: high watermark, the LSO as the broker computes it,
and what holds it back.
"""

from txn_audit.reconstruct.divergence import AHEAD, BEHIND, CONFLICT
from txn_audit.reconstruct.prepare_follows import FOLLOW_FIELDS, decisions, read_follows
from txn_audit.reconstruct.replicas import RankedReplicas, chosen_replicas, on_replicas, ranked_replicas
from txn_audit.reconstruct.stability import NAMED_MAX, partition_stability
from txn_audit.reconstruct.transactions import (
    DerivedOutput,
    Reconstruction,
    coordinator_current,
    partition_transactions,
    prepare_decision,
    prepare_records,
    producer_events,
    producer_pass,
    producer_transactional_ids,
    reconstruct,
    transaction_rows,
)
from txn_audit.reconstruct.producer_summary import summarize_producers

__all__ = [
    "AHEAD",
    "NAMED_MAX",
    "BEHIND",
    "CONFLICT",
    "DerivedOutput",
    "FOLLOW_FIELDS",
    "RankedReplicas",
    "Reconstruction",
    "chosen_replicas",
    "coordinator_current",
    "decisions",
    "on_replicas",
    "partition_stability",
    "partition_transactions",
    "prepare_decision",
    "prepare_records",
    "ranked_replicas",
    "read_follows",
    "producer_events",
    "producer_pass",
    "producer_transactional_ids",
    "reconstruct",
    "summarize_producers",
    "transaction_rows",
]
