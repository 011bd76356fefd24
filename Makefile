# One command does everything: `make run` or `make test` on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 8501
# `make run` keeps the sample checkpoints' history apart from ~/.stateglass (gitignored).
SAMPLES_DB ?= .stateglass/samples.duckdb

.PHONY: install test test-pure lint typecheck pytest run run-dynamodb samples screenshots bench bench-tests wheel clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml setup.py parsers/_speedups.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements.txt
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

lint: install
	$(BIN)/ruff check stateglass parsers collectors app tests benchmarks sample_checkpoints
	$(BIN)/ruff format --check stateglass parsers collectors app tests benchmarks sample_checkpoints

# mypy cannot follow setuptools' package-dir mapping: it reads the namespace through links.
typecheck: install
	mkdir -p build/typecheck/stateglass
	for layer in app collectors parsers; do ln -sfn ../../../$$layer build/typecheck/stateglass/$$layer; done
	ln -sfn ../../../stateglass/__init__.py build/typecheck/stateglass/__init__.py
	$(BIN)/mypy

# Spark 3.5 restarts checkpoints that `rewrite` wrote (tests/rewrite/test_rewrite_spark35.py): an
# interpreter of its own, since one venv holds one pyspark.
VENV35 := .venv35
SPARK35 := $(VENV35)/.installed

$(SPARK35):
	test -x $(VENV35)/bin/python || $(PYTHON) -m venv $(VENV35)
	$(VENV35)/bin/pip install --quiet 'pyspark==3.5.9'
	touch $(SPARK35)

# Two xdist workers, one per core of CI's machine; a file's tests run on one worker (its module
# fixtures are built once), the costly files first (tests/conftest.py).
PYTEST_WORKERS ?= 2

pytest: install $(SPARK35)
	SPARK35_PYTHON=$(CURDIR)/$(VENV35)/bin/python $(BIN)/pytest -n $(PYTEST_WORKERS) \
		--dist loadfile --no-loadscope-reorder

test: lint typecheck pytest

# The fidelity tests against Spark and the renderer's tests without the compiled extension.
test-pure: install
	STATEGLASS_PURE=1 $(BIN)/pytest tests/e2e/test_fidelity.py tests/e2e/test_corpus_fidelity.py \
		tests/parsers/test_sparkjson.py tests/parsers/test_columnar.py tests/parsers/test_speedups_build.py

# demo.toml: the samples are finished runs, so the stalled-query rule is off for them.
# The DynamoDB sample joins them: its checkpoint unpacked into .stateglass/dynamodb, its tables
# loaded into moto's DynamoDB on 127.0.0.1, which stops with the dashboard.
run: install
	$(BIN)/python sample_checkpoints/dynamodb/demo.py dashboard --workdir .stateglass/dynamodb -- \
		sample_checkpoints --db $(SAMPLES_DB) --port $(PORT) \
		--progress sample_checkpoints/eventlogs/spark-4.3 \
		--progress sample_checkpoints/eventlogs/demo --config sample_checkpoints/demo.toml

# The DynamoDB sample alone, on a database of its own.
run-dynamodb: install
	$(BIN)/python sample_checkpoints/dynamodb/demo.py run --port $(PORT)

# Redraw docs/screenshots/ from the demo stories (needs Debian's chromium).
screenshots: install
	$(BIN)/python sample_checkpoints/screenshots.py

samples: install
	$(BIN)/python sample_checkpoints/generate.py

bench: install
	$(BIN)/python benchmarks/bench_state_read.py

# The test cases marked `benchmark` (scale measurements that `make test` leaves out).
bench-tests: install
	$(BIN)/pytest -m benchmark

# The sdist and the wheel users install (`pipx install stateglass`), into dist/.
wheel: install
	$(BIN)/python -m build --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) $(VENV35) .mypy_cache .ruff_cache .pytest_cache build dist
