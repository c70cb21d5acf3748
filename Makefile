# lakestats — set-up and checks. Everything the project needs is installed from here.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo run test lint bench clean

install: $(STAMP)

# Re-install when the dependency list changes; the stamp makes `make test` cheap after.
$(STAMP): pyproject.toml
	@"$${JAVA_HOME:+$$JAVA_HOME/bin/}java" -version 2>&1 | head -n 1 | grep -Eq 'version "(1[7-9]|[2-9][0-9])' || { \
	  echo "lakestats needs Java 17 or newer for Spark: install it, e.g. 'sudo apt-get install openjdk-17-jre-headless', and put java on PATH or set JAVA_HOME"; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# `make demo FORMAT=paimon`: the same with a Paimon table and its published statistics file
demo: install
	$(BIN)/python examples/$(if $(filter paimon,$(FORMAT)),demo_paimon.py,demo.py)

run: install
	$(BIN)/lakestatsd --config $(or $(CONFIG),config/local.toml)

lint: install
	$(BIN)/ruff check core daemon tests
	$(BIN)/ruff format --check core daemon tests
	$(BIN)/mypy

# Three pytest-xdist workers, each with its own SparkSession, take whole test files. Much
# of the suite waits on processes and JVMs (daemons killed and restarted, Spark clusters
# coming up), so a third worker on 2 cores takes the time from ~15 to ~13 minutes.
# `TEST_ARGS=` runs it in one process; `make test TEST_ARGS="-n 0 -k name"` picks tests.
TEST_ARGS ?= -n 3 --dist loadfile --no-loadscope-reorder

test: lint
	$(BIN)/pytest $(TEST_ARGS)

bench: install
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python tests/bench/run.py $(BENCH_ARGS)
	$(BIN)/python tests/bench/deletes.py $(DELETES_BENCH_ARGS)
	$(BIN)/python tests/bench/equality_lookup.py
	$(BIN)/python tests/bench/delta.py $(DELTA_BENCH_ARGS)
	$(BIN)/python tests/bench/log_refresh.py
	$(BIN)/python tests/bench/qerror.py
	$(BIN)/python tests/bench/latency.py
	$(BIN)/python tests/bench/latency.py --format delta
	$(BIN)/python tests/bench/latency.py --format paimon
	$(BIN)/python tests/bench/memory.py
	$(BIN)/python tests/bench/memory.py --files 4 --work-dir .bench/memory-files --key-merge-sizes ""
	$(BIN)/python tests/bench/caches.py
	$(BIN)/python tests/bench/advise.py
	$(BIN)/python tests/bench/store_size.py
	$(BIN)/python tests/bench/paimon.py $(PAIMON_BENCH_ARGS)

clean:
	rm -rf $(VENV) .lakestats demo-warehouse demo-warehouse-paimon .pytest_cache .mypy_cache .ruff_cache
