"""Partition folder and file names (kafka-formats.md 1.3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txn_audit.formats.layout import (
    CHECKPOINT_FILES,
    INTERNAL_TOPICS,
    LOG_DIR_FILES,
    PARTITION_FILES,
    LogFileName,
    PartitionDirName,
    is_known_partition_file,
    parse_log_file_name,
    parse_partition_dir,
    partition_dir_name,
    segment_file_name,
)

UUID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("orders-0", PartitionDirName("orders", 0, "live")),
        ("my-topic.v2-17", PartitionDirName("my-topic.v2", 17, "live")),
        ("a-1-2", PartitionDirName("a-1", 2, "live")),
        ("a--1", PartitionDirName("a-", 1, "live")),
        ("__transaction_state-49", PartitionDirName("__transaction_state", 49, "live")),
        ("t-2147483647", PartitionDirName("t", 2147483647, "live")),
        ("t-007", PartitionDirName("t", 7, "live")),
        (f"orders-1.{UUID}-delete", PartitionDirName("orders", 1, "delete", UUID)),
        (f"my.topic-v2-3.{UUID}-future", PartitionDirName("my.topic-v2", 3, "future", UUID)),
        (f"a-b-4.{UUID}-stray", PartitionDirName("a-b", 4, "stray", UUID)),
        ("x-delete-5", PartitionDirName("x-delete", 5, "live")),
    ],
)
def test_valid_dirs(name: str, expected: PartitionDirName) -> None:
    assert parse_partition_dir(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "",
        "orders",
        "orders-",
        "-1",
        "orders-x",
        "orders-1.5",
        "orders- 1",
        "orders-1_0",
        "orders-٣",  # a non-ASCII digit
        "orders-2147483648",
        "orders-delete",  # -delete without the .uuid part
        f"orders-1{UUID}-delete",
        f"orders-1.{UUID}-future ",
        f"orders 1.{UUID}-delete",
        f"orders-x.{UUID}-stray",
        "not_a_partition",
        "meta.properties",
    ],
)
def test_invalid_dirs(name: str) -> None:
    assert parse_partition_dir(name) is None


def test_truncated_delete_dir_keeps_the_prefix() -> None:
    topic = "t" * 249
    suffix = f"-3.{UUID}-delete"
    name = topic[: 255 - len(suffix)] + suffix
    parsed = parse_partition_dir(name)
    assert parsed is not None and parsed.partition == 3 and parsed.status == "delete"
    assert topic.startswith(parsed.topic) and len(name) == 255


topics = st.from_regex(r"[a-zA-Z0-9._-]{1,60}", fullmatch=True)


@given(topics, st.integers(0, 2**31 - 1), st.sampled_from(["", "-delete", "-future", "-stray"]))
def test_dir_round_trip(topic: str, partition: int, suffix: str) -> None:
    name = partition_dir_name(topic, partition) + (f".{UUID}{suffix}" if suffix else "")
    parsed = parse_partition_dir(name)
    assert parsed is not None
    assert (parsed.topic, parsed.partition) == (topic, partition)
    assert parsed.status == (suffix[1:] if suffix else "live")
    assert parsed.is_live == (not suffix)


@pytest.mark.parametrize("ext", ["log", "index", "timeindex", "txnindex", "snapshot"])
@pytest.mark.parametrize(
    ("suffix", "status"), [("", "live"), (".deleted", "deleted"), (".cleaned", "cleaned"), (".swap", "swap")]
)
def test_file_names(ext: str, suffix: str, status: str) -> None:
    name = segment_file_name(12345, ext) + suffix
    assert name == f"00000000000000012345.{ext}{suffix}"
    assert parse_log_file_name(name) == LogFileName(name, ext, 12345, status)  # type: ignore[arg-type]


def test_kraft_snapshot_names() -> None:
    assert parse_log_file_name("00000000000000000126-0000000001.checkpoint") == LogFileName(
        "00000000000000000126-0000000001.checkpoint", "checkpoint", 126, "live", 1
    )
    part = parse_log_file_name("00000000000000000126-0000000001.checkpoint.part")
    assert part is not None and part.status == "partial"


@pytest.mark.parametrize(
    "name",
    [
        "0000000000000012345.log",  # 19 digits
        "000000000000000012345.log",  # 21 digits
        "00000000000000012345.LOG",
        "00000000000000012345.log.tmp",
        "00000000000000012345.log.deleted.deleted",
        "00000000000000012345.checkpoint",
        "00000000000000012345",
        "leader-epoch-checkpoint",
        "partition.metadata",
        "quorum-state",
        "notes.txt",
    ],
)
def test_names_that_are_not_log_files(name: str) -> None:
    assert parse_log_file_name(name) is None


def test_known_file_sets() -> None:
    assert all(is_known_partition_file(n) for n in PARTITION_FILES)
    assert not is_known_partition_file("notes.txt")
    assert is_known_partition_file("00000000000000000000.txnindex")
    assert CHECKPOINT_FILES <= LOG_DIR_FILES
    assert {"meta.properties", ".kafka_cleanshutdown", "bootstrap.checkpoint"} <= LOG_DIR_FILES
    assert INTERNAL_TOPICS == {"__transaction_state", "__consumer_offsets", "__cluster_metadata"}
    with pytest.raises(ValueError):
        segment_file_name(-1, "log")
