# Two commands on a fresh machine: `make demo` and `make test`; each bootstraps .venv itself.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

$(VENV)/.installed: requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps -e .
	touch $@

# Each compile switch off in turn (TIMERL_PASS_OFF, `timerl/options.py`), then each switch that is off by
# default on (TIMERL_PASS_ON), the whole suite once per switch: for CI (about 15 runs of `make test`), not part
# of `make test`.
PASSES := contributions algebra cse dce fusion per_iteration_fusion vectorize distribute scan_loops jit_groups matmul_add donation prefetch_draws
PASSES_ON :=  # switches that are off by default, to run the suite with each on

.PHONY: venv demo test test-passes bench docs
venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(PY) -m algorithms.demo

# Tests run on every core (pytest-xdist), but those marked `serial` (CPU-clock budgets) run alone afterwards.
PYTEST := $(PY) -m pytest tests -p no:cacheprovider
test: $(VENV)/.installed
	$(PYTEST) -n auto -m "not serial" && $(PYTEST) -m serial

test-passes: $(VENV)/.installed
	@failed=""; for pass in $(PASSES); do \
		echo "== TIMERL_PASS_OFF=$$pass"; \
		(TIMERL_PASS_OFF=$$pass $(PYTEST) -n auto -q -m "not serial" && TIMERL_PASS_OFF=$$pass $(PYTEST) -q -m serial) || failed="$$failed $$pass"; \
	done; for pass in $(PASSES_ON); do \
		echo "== TIMERL_PASS_ON=$$pass"; \
		(TIMERL_PASS_ON=$$pass $(PYTEST) -n auto -q -m "not serial" && TIMERL_PASS_ON=$$pass $(PYTEST) -q -m serial) || failed="$$failed $$pass(on)"; \
	done; if [ -n "$$failed" ]; then echo "failed with these switches off (or on):$$failed"; exit 1; fi

bench: $(VENV)/.installed  # rewrites the tables of docs/benchmarks.md
	$(PY) -m benchmarks bench

# docs/compile-options.md from CompileOptions' field docstrings (tests/test_docs.py fails when it is stale)
docs: $(VENV)/.installed
	$(PY) -m timerl.options_doc
