# Two commands on a fresh machine: `make demo` and `make test`; each bootstraps .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

.PHONY: venv demo test bench
venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m timerl.demo

test: $(VENV)/.installed
	$(PY) -m pytest tests -p no:cacheprovider

bench: $(VENV)/.installed
	$(PY) -m timerl.cli bench
