# The two commands of the README's quick start (`make demo`, `make test`) and CI's `.ci/run`.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.flower-installed

.PHONY: demo test bench setup lint

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/flower demo

test: $(STAMP)
	$(PY) -m pytest -n auto --dist loadgroup -q $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "no tests collected: that is a failure"; exit $$rc; }

bench: $(STAMP)
	$(PY) -m bench

lint: $(STAMP)
	$(PY) -m pip install --quiet -e '.[dev]'
	$(VENV)/bin/ruff check flower bench tests
	$(VENV)/bin/mypy flower
