"""Where an output may go: store URIs that are refused before anything is read or written."""

from __future__ import annotations

import pytest

from txn_audit import stores
from txn_audit.errors import UsageError
from txn_audit.usage import check_out


@pytest.mark.parametrize(
    ("location", "message"),
    [
        ("ftp://host/out", "not ftp://"),
        ("s3://bucket", "name a folder inside the bucket"),
        ("webhdfs://namenode:9870/", "name a folder .scheme://host/folder., not the root"),
        ("webhdfs:///out", "no NameNode host"),
        ("hdfs://namenode:8020/out", "libhdfs.*webhdfs://namenode:<http port>"),
    ],
)
def test_unusable_store_uris_are_usage_errors(location: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HADOOP_HOME", "ARROW_LIBHDFS_DIR"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UsageError, match=message):
        stores.open_store(location)


def test_what_is_remote() -> None:
    assert stores.is_remote("s3://b/out") and stores.is_remote("webhdfs://nn:9870/out")
    assert stores.is_remote("HDFS://nn/out")
    assert not stores.is_remote("out/dir") and not stores.is_remote("file:///srv/dumps/x") and not stores.is_remote(None)
    check_out("s3://b/out")  # left to stores.check_output: nothing local is checked or created


def test_run_ids_sort_by_time_and_are_unique() -> None:
    ids = [stores.new_run_id() for _ in range(50)]
    assert len(set(ids)) == 50 and all(i.startswith("run-") and len(i) == len("run-20261120T000000Z-0000abcd")
                                       for i in ids)
