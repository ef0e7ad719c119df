# Thin wrappers; every target installs what it needs into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint format generate check-generated bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## demo: compile and simulate the slider-crank; write results/ (npz, csv, png); then
## compile every method's integrators once for this installation (mbdgen warmup)
demo: $(STAMP)
	$(BIN)/mbdgen compile models/slider_crank.py
	$(BIN)/mbdgen simulate models/slider_crank.py --method abm --order 4 --h 1e-3 \
		--t-end 10 --alpha 5 --beta 5 -o results/slider_crank.npz --plot results/slider_crank.png
	$(BIN)/mbdgen simulate models/slider_crank.py --method abm --order 4 --h 1e-3 \
		--t-end 10 --alpha 5 --beta 5 -o results/slider_crank.csv --output-every 10 --no-progress
	$(BIN)/mbdgen warmup

## test: lint and the whole test suite, one pytest worker per core (TEST_WORKERS=1: serial)
# A worker that dies (a crash, or pytest-timeout ending a hung test) is replaced once;
# pytest-xdist runs the test it died in again, so a second death ends the run at once.
# The 15 longest tests close the log: the suite must stay under 25 minutes on 2 cores.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/ruff check mbdgen tests models
	$(BIN)/ruff format --check mbdgen tests models
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --max-worker-restart 1 \
		--durations=15

## test-fast: the suite without the tests marked slow (compile-heavy), for a quick check
test-fast: $(STAMP)
	$(BIN)/ruff check mbdgen tests models
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --max-worker-restart 1 \
		-m "not slow" --durations=10

lint: $(STAMP)
	$(BIN)/ruff check mbdgen tests models
	$(BIN)/ruff format --check mbdgen tests models
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format mbdgen tests models
	$(BIN)/ruff check --fix mbdgen tests models

## generate: regenerate generated/ from models/ (commit the result)
generate: $(STAMP)
	for f in models/*.py; do $(BIN)/mbdgen compile $$f || exit 1; done

check-generated: $(STAMP)
	for f in models/*.py; do $(BIN)/mbdgen compile --check $$f || exit 1; done

## bench: the speed tables, with MuJoCo and Exudyn as baselines where their wheels install
BENCH_STAMP := $(VENV)/.installed-bench
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]' || echo "mbdgen: the optional \
	baselines (MuJoCo, Exudyn) did not install; their columns will say 'not installed'"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/mbdgen bench
	$(BIN)/mbdgen bench --chain
	$(BIN)/mbdgen bench --first-run

## docs: the API reference from the docstrings (pdoc) into docs/api/, the spatial figure
API_MODULES = mbdgen mbdgen.model mbdgen.model.planar mbdgen.model.spatial \
	mbdgen.model.forces mbdgen.model.states mbdgen.analysis mbdgen.simulation \
	mbdgen.results mbdgen.methods mbdgen.errors mbdgen.plot
docs: $(STAMP)
	$(BIN)/pdoc -d numpy -o docs/api $(API_MODULES)
	$(BIN)/python docs/figures/spatial_elements.py -o docs/figures/spatial_elements.png

clean:
	rm -rf results build dist *.egg-info .pytest_cache .ruff_cache .mypy_cache
