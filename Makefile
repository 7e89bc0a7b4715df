# The two commands a newcomer needs:  make run  (demo)  and  make test  (suite).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_WAREHOUSE ?= demo-warehouse

.PHONY: install run test lint typecheck clean

$(BIN)/paimond: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(BIN)/paimond

# A local demo warehouse (tables written by pypaimon, all in level 0), an ingestion job that
# keeps committing to it, and the paimond daemon maintaining it for DEMO_SECONDS (0 = until
# Ctrl-C); metrics on http://127.0.0.1:9181/metrics. Then the tables' status.
DEMO_SECONDS ?= 60
run: install
	$(BIN)/python examples/demo.py $(DEMO_WAREHOUSE) $(DEMO_SECONDS)
	$(BIN)/paimond status $(DEMO_WAREHOUSE)

test: install
	$(BIN)/python -m pytest -q

lint: install
	$(BIN)/pip install --quiet ruff==0.17.5
	$(BIN)/ruff check format table lsm maintenance daemon config errors.py

typecheck: install
	$(BIN)/pip install --quiet mypy==2.4.1
	mkdir -p .typecheck && ln -sfn .. .typecheck/paimond
	MYPYPATH=.typecheck $(BIN)/mypy -p paimond

clean:
	rm -rf $(VENV) $(DEMO_WAREHOUSE) .pytest_cache .hypothesis .typecheck
