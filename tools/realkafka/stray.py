"""A raw ProduceRequest, for what Kafka's Java client never sends: a transactional batch to a
partition the coordinator was never told of, or a batch stamped with an old CreateTime.

The batch is built by kafka-python's ``DefaultRecordBatchBuilder`` and sent as a ProduceRequest
v3 (kafka-python's protocol classes) over a plain socket to the partition's leader; the
broker's answer (error code, base offset) is returned as it came.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["StrayBatch", "produce"]


@dataclass(frozen=True)
class StrayBatch:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional_id: str | None
    timestamps: tuple[int, ...]
    payload: str = "raw batch"


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        out += chunk
    return out


def produce(host: str, port: int, batch: StrayBatch, *, correlation_id: int = 1) -> dict[str, Any]:
    from kafka.protocol.old.produce import ProduceRequest_v3, ProduceResponse_v3
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=batch.transactional_id is not None,
        producer_id=batch.producer_id, producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
        batch_size=1 << 20,
    )
    for i, ts in enumerate(batch.timestamps):
        builder.append(i, timestamp=ts, key=b"stray", value=f"{batch.payload} {i}".encode(), headers=[])
    records = bytes(builder.build())
    request = ProduceRequest_v3(transactional_id=batch.transactional_id, acks=-1, timeout_ms=30000,
                                topic_data=[(batch.topic, [(batch.partition, records)])])
    request.with_header(correlation_id=correlation_id, client_id="txn-audit-harness")
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        body = _recv_exact(sock, size)
    response = ProduceResponse_v3.decode(body[4:])  # after the correlation id
    (topic_name, parts), = response.responses
    (index, error_code, base_offset, log_append_time), = parts
    return {"topic": topic_name, "index": index, "error_code": error_code, "base_offset": base_offset,
            "log_append_time_ms": log_append_time, "produce_api_version": 3}
