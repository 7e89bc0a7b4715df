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

# Builds a local demo warehouse (tables written by pypaimon in many commits, all in level 0),
# shows what paimond sees, compacts the primary-key table and shows the result.
run: install
	$(BIN)/python examples/demo_warehouse.py $(DEMO_WAREHOUSE)
	$(BIN)/paimond status $(DEMO_WAREHOUSE)
	$(BIN)/paimond compact $(DEMO_WAREHOUSE) --table demo.orders
	$(BIN)/paimond status $(DEMO_WAREHOUSE) --table demo.orders

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
