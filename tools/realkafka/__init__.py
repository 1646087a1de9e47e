"""The real-broker harness: Kafka releases from Maven Central, run on 127.0.0.1, as the oracle."""
