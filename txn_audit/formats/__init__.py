"""Pure-Python decoders and encoders of Kafka's on-disk formats.

Nothing in this package imports Spark: it is the layer every other one builds on, and it is
tested without a JVM. Modules: ``record_batch`` (v2 batches, records, control markers),
``legacy`` (v0/v1 message sets), ``segment`` (walking a ``.log`` file), ``compression``,
``txn_state`` (``__transaction_state``), ``consumer_offsets``, ``snapshot`` (producer state),
``txnindex``, ``offset_index`` (``.index``/``.timeindex``), ``checkpoint`` (text checkpoints
and properties), ``layout`` (file and folder names), ``model`` (the values they return).
"""
