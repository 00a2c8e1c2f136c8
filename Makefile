# Two commands for a new user: `make demo` and `make test`. Both set up .venv on first use.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export WANDB_MODE ?= disabled
export PYTHONUNBUFFERED := 1

.PHONY: demo test acceptance lint format clean setup

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

# Before a release, by hand (docs/development.md#acceptance-runs): the tests marked `acceptance`
# at their release lengths (RBMCAP_ACCEPTANCE=1: 60 s live streams at 240 Hz, 2,000 fuzzed inputs
# per reader, 20 + 6 kill -9 runs, live calibration), derandomised, in one process so that no
# other test runs beside a stream; -s prints each stream's figures, the fuzz counts go to
# ACCEPTANCE_OUT/fuzz.json. CI runs the same tests at their short lengths.
ACCEPTANCE_OUT ?= outputs/acceptance

# The FBX read-back (tests/io/test_fbx.py) needs Blender's bpy, whose wheel pins numpy<2, and the
# ufbx reader: an environment of their own (about 1 GB), pinned, made once; not in CI, whose 20
# minutes are spent.
BLENDER_VENV := .venv-blender
BLENDER_STAMP := $(BLENDER_VENV)/.installed

$(BLENDER_STAMP):
	test -x $(BLENDER_VENV)/bin/python || $(PYTHON) -m venv $(BLENDER_VENV)
	$(BLENDER_VENV)/bin/pip install --quiet bpy==5.0.1 numpy==1.26.4 ufbx==0.0.5
	touch $(BLENDER_STAMP)

acceptance: $(STAMP) $(BLENDER_STAMP)
	mkdir -p $(ACCEPTANCE_OUT)
	RBMCAP_ACCEPTANCE=1 HYPOTHESIS_PROFILE=ci RBMCAP_FUZZ_REPORT=$(ACCEPTANCE_OUT)/fuzz.json \
		RBMCAP_BLENDER=$(abspath $(BLENDER_VENV))/bin/python \
		$(PY) -m pytest -q -s -p no:cacheprovider -m acceptance

lint: $(STAMP)
	$(VENV)/bin/ruff check rbmcap tests train.py data_prep
	$(VENV)/bin/ruff format --check rbmcap tests train.py data_prep

format: $(STAMP)
	$(VENV)/bin/ruff format rbmcap tests train.py data_prep
	$(VENV)/bin/ruff check --fix rbmcap tests train.py data_prep

clean:
	rm -rf $(VENV) $(BLENDER_VENV) outputs .pytest_cache
