"""Pure-Python decoders and encoders of Kafka's on-disk formats.

Nothing in this package imports Spark: it is the layer every other one builds on, and it is
tested without a JVM. Modules: ``record_batch`` (v2 batches, records, control markers),
``legacy`` (v0/v1 message sets), ``segment`` (walking a ``.log`` file), ``fast_headers``
(the same walk for v2 batch headers, compiled and column-wise), ``compression``,
``txn_state`` (``__transaction_state``), ``consumer_offsets``, ``cluster_metadata`` (the KRaft
metadata log's partition leadership), ``snapshot`` (producer state),
``txnindex``, ``offset_index`` (``.index``/``.timeindex``), ``checkpoint`` (text checkpoints
and properties), ``layout`` (file and folder names), ``model`` (the values they return),
and the readers of Kafka's tools' text output: ``dumplog_text`` (``kafka-dump-log``),
``transactions_text`` (``kafka-transactions.sh`` tables), ``input_kind`` (sniffing a file).
"""
