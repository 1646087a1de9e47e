"""Real storage servers on 127.0.0.1 for the tests: S3Proxy (the S3 API over a local folder) and
an HDFS NameNode with one DataNode (Hadoop's MiniDFSCluster), both fetched from Maven Central.

``python -m tools.stores`` fetches both into the cache (``scripts/ensure-storage-servers.sh``);
``tools.stores.servers`` starts and stops them.
"""
