"""txn-audit: an offline auditor of Apache Kafka transactions."""

__version__ = "0.1.0"
