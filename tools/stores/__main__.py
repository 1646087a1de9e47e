"""``python -m tools.stores``: fetch S3Proxy and the HDFS minicluster into the cache (exit 2 if not)."""

from __future__ import annotations

import sys

from tools.stores.fetch import StoreToolError, fetch_hdfs, fetch_s3proxy


def main() -> int:
    try:
        fetch_s3proxy()
        fetch_hdfs()
    except StoreToolError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
