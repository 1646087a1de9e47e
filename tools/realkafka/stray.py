"""Raw requests, for what Kafka's Java client never sends.

* ``produce``: a transactional batch to a partition the coordinator was never told of, or a
  batch stamped with an old CreateTime. The batch is built by kafka-python's
  ``DefaultRecordBatchBuilder`` and sent as a ProduceRequest v3.
* ``write_marker``: a WriteTxnMarkers request, the one a transaction coordinator sends to a
  partition's leader to end a transaction there: sent again for a transaction that already
  ended, it is the coordinator's retry after a lost answer or a coordinator failover.

* ``init_producer_id`` and ``add_partitions``: InitProducerId (v6 with ``Enable2Pc``, KIP-939's
  two-phase commit, which no release's KafkaProducer sends yet) and AddPartitionsToTxn v3, so
  that ``produce`` can then write a transactional batch of a transaction begun by hand.

They go over a plain socket to the partition's leader (or the transaction coordinator), with
kafka-python's protocol classes; the broker's answer is returned as it came.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from typing import Any

__all__ = ["StrayBatch", "StrayMarker", "add_partitions", "init_producer_id", "produce", "write_marker"]


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


@dataclass(frozen=True)
class StrayMarker:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transaction_version: int  # sent where the broker takes WriteTxnMarkers v2 (KIP-1228)


def _exchange(host: str, port: int, request: Any, correlation_id: int) -> bytes:
    """Send one framed request; its response as it came, correlation id first."""
    request.with_header(correlation_id=correlation_id, client_id="txn-audit-harness")
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(request.encode(header=True, framed=True))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        body = _recv_exact(sock, size)
    return body


def _max_version(host: str, port: int, api_key: int) -> int:
    """The highest version of ``api_key`` the broker takes (ApiVersions v0)."""
    from kafka.protocol.old.api_versions import ApiVersionsRequest_v0, ApiVersionsResponse_v0

    body = _exchange(host, port, ApiVersionsRequest_v0(), 1)
    response = ApiVersionsResponse_v0.decode(body[4:])
    for key, _min, high in response.api_keys:
        if key == api_key:
            return int(high)
    raise ConnectionError(f"the broker does not take API key {api_key}")


def write_marker(host: str, port: int, marker: StrayMarker, *, correlation_id: int = 2) -> dict[str, Any]:
    """One WriteTxnMarkers request for one partition, at the highest version the broker takes
    (1 or 2; ``transaction_version`` only goes with 2); the partition's error code."""
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest, WriteTxnMarkersResponse

    version = min(2, _max_version(host, port, WriteTxnMarkersRequest.API_KEY))
    entry = WriteTxnMarkersRequest.WritableTxnMarker
    fields: dict[str, Any] = {
        "producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
        "transaction_result": marker.commit, "coordinator_epoch": marker.coordinator_epoch,
        "topics": [entry.WritableTxnMarkerTopic(name=marker.topic, partition_indexes=[marker.partition])],
    }
    if version >= 2:
        fields["transaction_version"] = marker.transaction_version
    request = WriteTxnMarkersRequest[version](markers=[entry(**fields)])
    body = _exchange(host, port, request, correlation_id)
    response = WriteTxnMarkersResponse[version].decode(body, header=True)  # a flexible header from v1
    (result,) = response.markers
    (topic,) = result.topics
    (partition,) = topic.partitions
    return {"topic": topic.name, "index": partition.partition_index, "error_code": partition.error_code,
            "write_txn_markers_api_version": version}


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
    body = _exchange(host, port, request, correlation_id)
    response = ProduceResponse_v3.decode(body[4:])  # after the correlation id
    (topic_name, parts), = response.responses
    (index, error_code, base_offset, log_append_time), = parts
    return {"topic": topic_name, "index": index, "error_code": error_code, "base_offset": base_offset,
            "log_append_time_ms": log_append_time, "produce_api_version": 3}


def init_producer_id(host: str, port: int, transactional_id: str, *, timeout_ms: int, enable_2pc: bool,
                     correlation_id: int = 3) -> dict[str, Any]:
    """InitProducerId for ``transactional_id`` at the highest version the broker takes (6, the one
    that carries ``Enable2Pc``, when ``enable_2pc``; the broker advertises it only with
    ``unstable.api.versions.enable=true``); the request's fields and the answer."""
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse

    high = _max_version(host, port, InitProducerIdRequest.API_KEY)
    if enable_2pc and high < 6:
        raise ConnectionError(f"the broker takes InitProducerId up to v{high}: no Enable2Pc (v6)")
    version = min(6, high)
    fields: dict[str, Any] = {"transactional_id": transactional_id, "transaction_timeout_ms": timeout_ms}
    if version >= 3:
        fields.update(producer_id=-1, producer_epoch=-1)
    if version >= 6:
        fields.update(enable2_pc=enable_2pc, keep_prepared_txn=False)
    request = InitProducerIdRequest[version](**fields)
    body = _exchange(host, port, request, correlation_id)
    response = InitProducerIdResponse[version].decode(body, header=True)
    return {"request": {**fields, "init_producer_id_api_version": version},
            "response": {"error_code": response.error_code, "producer_id": response.producer_id,
                         "producer_epoch": response.producer_epoch}}


def add_partitions(host: str, port: int, transactional_id: str, producer_id: int, producer_epoch: int,
                   topic: str, partitions: list[int], *, correlation_id: int = 4) -> dict[str, Any]:
    """AddPartitionsToTxn v3 (the last version a client sends) for ``partitions`` of ``topic``;
    each partition's error code."""
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

    request = AddPartitionsToTxnRequest[3](
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=partitions)])
    body = _exchange(host, port, request, correlation_id)
    response = AddPartitionsToTxnResponse[3].decode(body, header=True)
    errors = {f"{t.name}-{r.partition_index}": r.partition_error_code
              for t in response.results_by_topic_v3_and_below for r in t.results_by_partition}
    return {"add_partitions_to_txn_api_version": 3, "error_codes": errors}
