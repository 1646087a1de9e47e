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

.PHONY: env java browser kafka-tools lint demo test fuzz sample kafka-corpus clean help

help:
	@echo "make demo   - create .venv if needed, then ingest the bundled sample dump ($(SAMPLE_DIR))"
	@echo "make test   - create .venv if needed, then lint, type-check and run the whole test suite"
	@echo "make lint   - ruff and mypy --strict over txn_audit/ and jobs/"
	@echo "make fuzz   - the long mutation run over every decoder ($(FUZZ_MUTATIONS) mutations; see docs/reliability.md)"
	@echo "make sample - regenerate the bundled sample dump"
	@echo "make kafka-corpus [KAFKA_VERSIONS='4.4.0 3.6.2'] [SCENARIOS='healthy crashed-producer']"
	@echo "             - run real Kafka brokers on 127.0.0.1 and rewrite $(CORPUS)/kafka-<version>/<scenario>/"
	@echo "make clean  - remove .venv and outputs"

env:
	@PYTHON="$(PYTHON)" VENV="$(VENV)" scripts/ensure-env.sh

java:
	@scripts/check-java.sh

browser:
	@scripts/ensure-browser.sh

kafka-tools:
	@scripts/ensure-kafka-tools.sh

lint: env
	$(BIN)/ruff check txn_audit jobs
	$(BIN)/mypy

demo: env java
	@test -f $(SAMPLE_DIR)/manifest.json || $(BIN)/txn-audit sample --out $(SAMPLE_DIR)
	$(BIN)/txn-audit scan $(SAMPLE_DIR) --out $(DEMO_OUT) || test $$? -eq 1

test: env java browser kafka-tools lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

fuzz: env
	$(BIN)/python -m tests.fuzz.run --mutations $(FUZZ_MUTATIONS) --seed $(FUZZ_SEED)

kafka-corpus: env java kafka-tools
	$(BIN)/python -m tools.realkafka --out $(CORPUS) --versions $(KAFKA_VERSIONS) \
	    $(if $(filter all,$(SCENARIOS)),,--scenarios $(SCENARIOS))

sample: env
	$(BIN)/txn-audit sample --out $(SAMPLE_DIR) --force

clean:
	rm -rf $(VENV) out .pytest_cache
