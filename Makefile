# Two entry points on a fresh machine: `make demo` and `make test`. Both create the Python
# environment in .venv/ by themselves when it is missing, broken or older than pyproject.toml.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
SAMPLE_DIR ?= sample_data/dump
DEMO_OUT ?= out/demo
PYTEST_ARGS ?=
FUZZ_MUTATIONS ?= 10000
FUZZ_SEED ?= 20261123
KAFKA_VERSIONS ?= 2.8.2 3.6.2 3.9.2 4.0.2 4.1.2 4.4.0
SCENARIOS ?= all
CORPUS ?= tests/corpus
EXECUTOR_ENV ?= dist/txn-audit-executor-env.tar.gz

# the test tiers (docs/testing.md): `-m` expressions over the markers in pyproject.toml
FAST_TIER := not spark and not corpus and not live
SPARK_TIER := spark and not corpus and not live
# the fast tier finds no Java: a test in it that starts a JVM fails
NO_JAVA := JAVA_HOME=/nonexistent/the-fast-tier-starts-no-jvm

.PHONY: env java browser kafka-tools storage-servers lint demo test test-fast test-spark test-corpus test-live fuzz \
	sample kafka-corpus executor-env clean help

help:
	@echo "make demo   - create .venv if needed, then ingest the bundled sample dump ($(SAMPLE_DIR))"
	@echo "make test   - create .venv if needed, then lint, type-check and run the whole test suite"
	@echo "make test-fast   - the fast tier: no JVM, no corpus scan (a few minutes)"
	@echo "make test-spark  - the Spark tier: tests on a local SparkSession, corpus and live tests apart"
	@echo "make test-corpus - the corpus tier: scans of the real-broker corpora"
	@echo "                   (one scenario: make test-corpus PYTEST_ARGS='-k 4.4.0/healthy')"
	@echo "make test-live   - the live tier: Kafka from Maven, a standalone Spark cluster, Jupyter, Chromium,"
	@echo "                   S3Proxy and an HDFS minicluster from Maven"
	@echo "make lint   - ruff and mypy --strict over txn_audit/ and jobs/"
	@echo "make fuzz   - the long mutation run over every decoder ($(FUZZ_MUTATIONS) mutations; see docs/reliability.md)"
	@echo "make sample - regenerate the bundled sample dump"
	@echo "make kafka-corpus [KAFKA_VERSIONS='4.4.0 3.6.2'] [SCENARIOS='healthy crashed-producer']"
	@echo "             - run real Kafka brokers on 127.0.0.1 and rewrite $(CORPUS)/kafka-<version>/<scenario>/"
	@echo "make executor-env - pack txn_audit and its runtime dependencies for executors ($(EXECUTOR_ENV))"
	@echo "make clean  - remove .venv, dist and outputs"

env:
	@PYTHON="$(PYTHON)" VENV="$(VENV)" scripts/ensure-env.sh

java:
	@scripts/check-java.sh

browser:
	@scripts/ensure-browser.sh

kafka-tools:
	@scripts/ensure-kafka-tools.sh

# rebuilt only when pyproject.toml or txn_audit/ changed since (README: "On a real cluster")
executor-env: env
	@PYTHON="$(PYTHON)" VENV="$(VENV)" scripts/build-executor-env.sh $(EXECUTOR_ENV)

storage-servers: env
	@VENV="$(VENV)" scripts/ensure-storage-servers.sh

lint: env
	$(BIN)/ruff check txn_audit jobs
	$(BIN)/mypy

demo: env java
	@test -f $(SAMPLE_DIR)/manifest.json || $(BIN)/txn-audit sample --out $(SAMPLE_DIR)
	$(BIN)/txn-audit scan $(SAMPLE_DIR) --out $(DEMO_OUT) || test $$? -eq 1

test: env java browser kafka-tools storage-servers lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: env
	$(NO_JAVA) $(BIN)/python -m pytest -m "$(FAST_TIER)" $(PYTEST_ARGS)

test-spark: env java
	$(BIN)/python -m pytest -m "$(SPARK_TIER)" $(PYTEST_ARGS)

test-corpus: env java
	$(BIN)/python -m pytest -m corpus $(PYTEST_ARGS)

test-live: env java browser kafka-tools storage-servers
	$(BIN)/python -m pytest -m live $(PYTEST_ARGS)

fuzz: env
	$(BIN)/python -m tests.fuzz.run --mutations $(FUZZ_MUTATIONS) --seed $(FUZZ_SEED)

kafka-corpus: env java kafka-tools
	$(BIN)/python -m tools.realkafka --out $(CORPUS) --versions $(KAFKA_VERSIONS) \
	    $(if $(filter all,$(SCENARIOS)),,--scenarios $(SCENARIOS))

sample: env
	$(BIN)/txn-audit sample --out $(SAMPLE_DIR) --force

clean:
	rm -rf $(VENV) out dist .pytest_cache
