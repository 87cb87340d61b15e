# The commands of the README:
#   make run   - set up .venv and run the main job (quick CPU suite -> report)
#   make test  - set up .venv with the test extras, run ruff and mypy, the tests, then build the docs
#                (mkdocs build --strict: a broken link or a stale generated page fails)
#   make gpu-check - accept a GPU machine (benchmarks/gpu_acceptance.py; one line and exit 0 without a GPU)
# TORCH_SPEC pins the builds this project is tested with; override it for another machine,
# e.g. make run TORCH_SPEC="torch torchvision", or for PyTorch's CPU-only builds:
# make run TORCH_SPEC="torch torchvision --index-url https://download.pytorch.org/whl/cpu".

VENV       ?= .venv
PYTHON     ?= python3
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
PIP        := $(VENV)/bin/pip
CNNBENCH   := $(VENV)/bin/cnnbench
RESULTS    ?= results/quick
REPORT     ?= report/quick
GPU_SUMMARY ?= out/gpu-acceptance.md

.PHONY: run test gpu-check clean-venv

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install --quiet $(TORCH_SPEC)
	$(PIP) install --quiet -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install --quiet -e '.[test]'
	touch $@

run: $(VENV)/.installed
	$(CNNBENCH) sweep suites/quick-cpu.yaml --results-dir $(RESULTS)
	$(CNNBENCH) report $(RESULTS) -o $(REPORT)
	@echo
	@echo "cnnbench is installed in $(VENV). Next: . $(VENV)/bin/activate && cnnbench run --help"
	@echo "(or call it by its path: $(VENV)/bin/cnnbench run --model resnet18 --device cpu --image-size 112 --batch-size 16 --num-batches 20;"
	@echo " about 30 s on 2 CPU cores: the defaults, 224 px and 100 batches of 64, take a quarter of an hour on a CPU)"

test: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict  # not --quiet: it hides the warnings strict fails on

# TIMM_BENCHMARK=path/to/pytorch-image-models/benchmark.py adds the comparison with timm.
gpu-check: $(VENV)/.installed-test
	TIMM_BENCHMARK="$(TIMM_BENCHMARK)" $(VENV)/bin/python benchmarks/gpu_acceptance.py --summary $(GPU_SUMMARY)

clean-venv:
	rm -rf $(VENV)
