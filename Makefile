# The two commands a newcomer needs:  make run  (demo)  and  make test  (suite).
# Installs go through uv (bootstrapped into .tools/ from PyPI) and the versions locked in uv.lock.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
UV := .tools/bin/uv
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --python $(PYTHON)
DEMO_WAREHOUSE ?= demo-warehouse

.PHONY: install install-demo install-docs run test lint typecheck docs clean

$(UV):
	@echo "==> bootstrapping uv $(UV_VERSION) into .tools/"
	@$(PYTHON) -m venv .tools
	@.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Runtime dependencies plus the demo's writer (pypaimon): what `make run` needs, nothing more.
install-demo: $(UV)
	@echo "==> installing paimond and the demo's writer into $(VENV) (locked versions)"
	@$(SYNC) --no-dev --group demo

# Everything the suite needs: the test oracles (pypaimon, pypaimon-rust, Java Paimon's jar),
# moto's S3 server and PySpark.
install: $(UV)
	@echo "==> installing paimond with its test dependencies into $(VENV) (locked versions)"
	@$(SYNC) --no-dev --group test --group lint --extra spark

# A local demo warehouse (tables written by pypaimon, all in level 0), an ingestion job that
# keeps committing to it, and the paimond daemon maintaining it for DEMO_SECONDS (0 = until
# Ctrl-C); metrics on http://127.0.0.1:9181/metrics. Then the tables' status.
DEMO_SECONDS ?= 60
run: install-demo
	$(BIN)/python examples/demo.py $(DEMO_WAREHOUSE) $(DEMO_SECONDS)
	$(BIN)/paimond status $(DEMO_WAREHOUSE)

test: install
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --config pyproject.toml

typecheck: install
	mkdir -p .typecheck && ln -sfn .. .typecheck/paimond
	MYPYPATH=.typecheck $(BIN)/mypy -p paimond

# The documentation site (MkDocs, Material theme): the reference pages regenerated from the code,
# then a strict build (a broken link or anchor fails) into site/. --inexact keeps whatever else
# the venv holds (the test tools of make install).
install-docs: $(UV)
	@echo "==> installing paimond and the documentation tools into $(VENV) (locked versions)"
	@$(SYNC) --no-dev --group docs --inexact

docs: install-docs
	$(BIN)/python docs/generate.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .tools $(DEMO_WAREHOUSE) .pytest_cache .hypothesis .typecheck build site
