# doctrans: end-to-end targets. Each target is the file its stage writes.
#   make quickstart   install, preprocess the TVsub quickstart slice, train (45 min), translate, score
#   make test         install and run the test suite
# Variables: DATA (TVsub root), DOCS (training episodes, a slice like 0:300), BUDGET (minutes),
#            PREP (prepared dataset dir), RUN (run dir), BEAM.

SHELL   := /bin/bash
PYTHON  ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
DATA    ?= ../shared/corpora/tvsub
DOCS    ?= 0:300
BUDGET  ?= 45
BEAM    ?= 5
PREP    ?= data/quickstart
RUN     ?= runs/quickstart
TVSUB_GIT := https://github.com/longyuewangdcu/tvsub

.PHONY: quickstart install test check-data clean-quickstart help

help:
	@sed -n '2,6p' Makefile

quickstart: $(RUN)/scores.txt
	@cat $(RUN)/scores.txt

install: $(VENV)/.installed

$(VENV)/.installed: setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $@

check-data:
	@if [ ! -d "$(DATA)/train" ] || [ ! -f "$(DATA)/test/test.ref.sgm" ]; then \
	  echo "error: the TVsub corpus was not found at DATA=$(DATA)." >&2; \
	  echo "Get it with:  git clone $(TVSUB_GIT) $(DATA)   (or run: make quickstart DATA=/path/to/tvsub)" >&2; \
	  exit 1; fi

$(PREP)/meta.json: | install check-data
	$(BIN)/doctrans preprocess --data-dir $(DATA) --train-docs $(DOCS) -o $(PREP)

$(RUN)/best.pt: $(PREP)/meta.json
	$(BIN)/doctrans train pipelines/quickstart.yaml data.prepared=$(PREP) run_dir=$(RUN) --max-time $(BUDGET) \
	  $(if $(wildcard $(RUN)/last.pt),--resume,)

$(RUN)/test.hyp: $(RUN)/best.pt
	$(BIN)/doctrans translate -c $(RUN)/best.pt -i $(DATA)/test/test.zh -o $@ --beam $(BEAM)

$(RUN)/scores.txt: $(RUN)/test.hyp
	$(BIN)/doctrans score $< -r $(DATA)/test/test.ref.sgm --json --out $(RUN)/scores.json > /dev/null
	$(BIN)/doctrans score $< -r $(DATA)/test/test.ref.sgm > $@

test: install
	$(BIN)/python -m pytest -q tests

clean-quickstart:
	rm -rf $(PREP) $(RUN)
