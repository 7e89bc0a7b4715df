# The two commands a newcomer needs:  make run  (demo)  and  make test  (suite; make test-fast
# for the quick subset).
# Installs go through uv (bootstrapped into .tools/ from PyPI) and the versions locked in uv.lock.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
UV := .tools/bin/uv
# Byte code compiled at install, as pip and the container image do: where nothing may be written
# later (PYTHONDONTWRITEBYTECODE=1, set on CI's machines and in containers), a process that finds
# no .pyc compiles every module it imports (pandas: 2.4 s instead of 0.7 s). COMPILE does
# paimond's own modules (the checkout is the package): a module edited since is compiled again
# on import.
SYNC := UV_PROJECT_ENVIRONMENT=$(VENV) $(UV) sync --locked --python $(PYTHON) --compile-bytecode
COMPILE := $(BIN)/python -m compileall -q -x '/\.|/(site|build|dist)/' .
DEMO_WAREHOUSE ?= demo-warehouse

.PHONY: install install-demo install-docs run test test-fast lint typecheck docs clean

$(UV):
	@echo "==> bootstrapping uv $(UV_VERSION) into .tools/"
	@$(PYTHON) -m venv .tools
	@.tools/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

# Runtime dependencies plus the demo's writer (pypaimon): what `make run` needs, nothing more.
install-demo: $(UV)
	@echo "==> installing paimond and the demo's writer into $(VENV) (locked versions)"
	@$(SYNC) --no-dev --group demo
	@$(COMPILE)

# Everything the suite needs: the test oracles (pypaimon, pypaimon-rust, Java Paimon's jar),
# moto's S3 server and PySpark.
install: $(UV)
	@echo "==> installing paimond with its test dependencies into $(VENV) (locked versions)"
	@$(SYNC) --no-dev --group test --group lint --extra spark
	@$(COMPILE)

# A local demo warehouse (tables written by pypaimon, all in level 0), an ingestion job that
# keeps committing to it, and the paimond daemon maintaining it for DEMO_SECONDS (0 = until
# Ctrl-C); metrics on http://127.0.0.1:9181/metrics. Then the tables' status.
DEMO_SECONDS ?= 60
run: install-demo
	$(BIN)/python examples/demo.py $(DEMO_WAREHOUSE) $(DEMO_SECONDS)
	$(BIN)/paimond status $(DEMO_WAREHOUSE)

# make test: the whole suite on one pytest-xdist worker per core (PYTEST_WORKERS=auto; 2,700
# tests). --dist loadgroup spreads the tests one by one, except the groups tests/conftest.py
# gives: every Spark test on one worker (one local Spark cluster per run) and the Java
# differential's module on one worker; the kill campaigns and the tests marked slow start first.
# Each worker has its own temporary directories, S3 endpoint port and
# JVMs; Maven jar fetches take a file lock. PYTEST_ARGS adds options (CI's lowest Python:
# -m "not crash_campaign"); PYTEST_WORKERS=0 runs in one process. The 25 slowest tests are
# listed at the end: where the suite's time goes.
PYTEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadgroup --durations=25

test: install
	$(PYTEST) $(PYTEST_ARGS)

# make test-fast: what a contributor runs between edits (about 1,200 tests, 1.5 minutes
# on 2 cores): the tests that need no oracle (PAIMOND_TESTS_WITHOUT_ORACLES: no pypaimon, no
# pypaimon-rust), no JVM, no Spark, no S3 server, no kill campaign and no test marked slow,
# property tests at 15 examples. tests/conftest.py puts the jvm and spark markers on from the
# fixtures a test uses (markers: pyproject.toml).
FAST_MARKERS := not jvm and not spark and not crash_campaign and not s3 and not azure and not slow
test-fast: install
	HYPOTHESIS_PROFILE=fast PAIMOND_TESTS_WITHOUT_ORACLES=1 $(PYTEST) -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

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

# DOCS_GENERATE_ARGS=--check (CI): fail, naming the page, where a committed reference is stale.
docs: install-docs
	$(BIN)/python docs/generate.py $(DOCS_GENERATE_ARGS)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .tools $(DEMO_WAREHOUSE) .pytest_cache .hypothesis .typecheck build site
