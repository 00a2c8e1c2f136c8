# Two commands for a new user: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export WANDB_MODE ?= disabled
export PYTHONUNBUFFERED := 1

.PHONY: demo test lint format clean setup

setup: $(STAMP)

$(STAMP): requirements.txt constraints.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found; set PYTHON=/path/to/python3.11"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/rbmcap demo --out outputs/demo

# The default suite runs in PYTEST_WORKERS processes (pytest-xdist), a test file to each in turn,
# so that a module's fixtures are built once; PYTEST_WORKERS=1 runs it in this one process.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadfile)

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_PARALLEL)

lint: $(STAMP)
	$(VENV)/bin/ruff check rbmcap tests train.py data_prep
	$(VENV)/bin/ruff format --check rbmcap tests train.py data_prep

format: $(STAMP)
	$(VENV)/bin/ruff format rbmcap tests train.py data_prep
	$(VENV)/bin/ruff check --fix rbmcap tests train.py data_prep

clean:
	rm -rf $(VENV) outputs .pytest_cache
