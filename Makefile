# batchpilot: `make run` and `make test` do all set-up themselves on a fresh machine.
# Python 3.11 to 3.13; the venv uses `python3` unless PYTHON is given.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
SAMVENV := .venv-sam
BIN := $(VENV)/bin
SAM := $(SAMVENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
CHECKOVVENV := .venv-checkov
CHECKOV := $(CHECKOVVENV)/bin/checkov
CHECKOV_VERSION := 3.3.30
export AWS_DEFAULT_REGION ?= us-east-1
export SAM_CLI_TELEMETRY := 0

.PHONY: run test lint typecheck validate security unit bench build clean help simulate report-screenshot test-moto-latest

help:
	@echo "make run    - set up and replay every sample event in events/ (the main local job)"
	@echo "make test   - set up and run every check (ruff, mypy, sam validate --lint, checkov, pytest)"
	@echo "make security - checkov on template.yaml (skipped checks and their reasons: .checkov.yaml)"
	@echo "make test-moto-latest - the embedded-AWS tests against the newest moto the project allows (a venv of its own)"
	@echo "make bench  - run the benchmarks in benchmarks/"
	@echo "make simulate - run the article's experiment: FIFO vs fair share + batchpilot (batchpilot simulate --compare)"
	@echo "make build  - sam build (needs python3.13: on the PATH or in ~/.pyenv/versions)"
	@echo "make report-screenshot - replay a few samples to an HTML report and save docs/replay-report.png (needs /usr/bin/chromium)"

$(BIN)/.installed: pyproject.toml layers/batchpilot/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# The SAM CLI pins its own dependency versions, so it lives in a venv of its own.
$(SAM): Makefile
	$(PYTHON) -m venv $(SAMVENV)
	$(SAMVENV)/bin/pip install --quiet --upgrade pip
	$(SAMVENV)/bin/pip install --quiet aws-sam-cli==$(SAM_CLI_VERSION)
	touch $@

# checkov pins its own dependencies too (older boto3, botocore and packaging than ours): a venv of its own.
$(CHECKOV): Makefile
	$(PYTHON) -m venv $(CHECKOVVENV)
	$(CHECKOVVENV)/bin/pip install --quiet --upgrade pip
	$(CHECKOVVENV)/bin/pip install --quiet checkov==$(CHECKOV_VERSION)
	touch $@

run: $(BIN)/.installed
	$(BIN)/batchpilot replay events/

# The README's screenshot of the replay's HTML report: a few samples replayed (two capacity scenarios a
# day apart, a resubmission, a page; Teams on), the report's first screens in headless Chromium.
SCREENSHOT_INPUTS := events/scenarios/capacity/burst.json events/scenarios/capacity/quiet-night.json \
  events/scenarios/recovery/container-job-spot-reclaimed.json events/service-job/failed-algorithm-error.json \
  events/scenarios/ledger/fair-share-fleet.json
SCREENSHOT_TEAMS := TeamsWebhookSecretArn=arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot-teams-AbCdEf
report-screenshot: $(BIN)/.installed
	@mkdir -p .aws-sam
	$(BIN)/batchpilot replay --format json --parameter-overrides $(SCREENSHOT_TEAMS) \
	  --report .aws-sam/replay-report.html $(SCREENSHOT_INPUTS) > /dev/null
	$(BIN)/python -m batchpilot_local.testing.browser .aws-sam/replay-report.html docs/replay-report.png 3000

simulate: $(BIN)/.installed
	$(BIN)/batchpilot simulate --compare events/simulate/article-fifo.yaml events/simulate/article-fair-share.yaml

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Each function's handler is a module named `app`: type-check them one at a time.
typecheck: $(BIN)/.installed
	$(BIN)/mypy layers/batchpilot/batchpilot local/batchpilot_local
	for handler in functions/*/app.py; do $(BIN)/mypy "$$handler" || exit 1; done

validate: $(SAM)
	$(SAM) validate --lint --template template.yaml

# checkov on the SAM template, then on its CloudFormation translation (the resources SAM generates:
# event source mappings, permissions, the layer version). Skipped checks, with reasons: .checkov.yaml.
CHECKOV_RUN := --config-file .checkov.yaml --framework cloudformation --skip-download --quiet --compact
security: $(CHECKOV) $(BIN)/.installed
	$(CHECKOV) $(CHECKOV_RUN) -f template.yaml
	@mkdir -p .aws-sam/checkov
	$(BIN)/python -c 'import json; from batchpilot_local.testing.paths import TEMPLATE_PATH; \
	  from batchpilot_local.testing.templates import parse_template, translate; \
	  print(json.dumps(translate(parse_template(TEMPLATE_PATH.read_text(encoding="utf-8"))), indent=1, default=str))' \
	  > .aws-sam/checkov/template.json
	$(CHECKOV) $(CHECKOV_RUN) -f .aws-sam/checkov/template.json

unit: $(BIN)/.installed $(SAM)
	SAM_CLI=$(abspath $(SAM)) $(BIN)/python -m pytest

test: lint typecheck validate security unit

# The embedded AWS against the newest moto release pyproject.toml's range allows (moto floats
# within its major version), in a venv of its own so that .venv keeps its moto: the emulator's
# tests, the moto fixes' and the contract tests. CI runs it after `make test`.
MOTOVENV := .venv-moto-latest
EMBEDDED_AWS_TESTS := tests/integration/test_emulator.py tests/integration/test_emulator_quota_shares.py \
  tests/integration/test_moto_fixes.py tests/aws
MOTO_REQUIREMENT := from importlib.metadata import requires; \
  print(next(r for r in requires("batchpilot") if r.startswith("moto")))
test-moto-latest:
	rm -rf $(MOTOVENV)
	$(PYTHON) -m venv $(MOTOVENV)
	$(MOTOVENV)/bin/pip install --quiet --upgrade pip
	$(MOTOVENV)/bin/pip install --quiet -e '.[dev]'
	$(MOTOVENV)/bin/pip install --quiet --upgrade "$$($(MOTOVENV)/bin/python -c '$(MOTO_REQUIREMENT)')"
	@$(MOTOVENV)/bin/python -c 'from importlib.metadata import version; print("test-moto-latest: moto", version("moto"))'
	$(MOTOVENV)/bin/python -m pytest -p no:cacheprovider $(EMBEDDED_AWS_TESTS)

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_metrics_handler.py
	$(BIN)/python benchmarks/bench_cold_start.py
	$(BIN)/python benchmarks/bench_alerts.py
	$(BIN)/python benchmarks/bench_recovery.py
	$(BIN)/python benchmarks/bench_capacity.py
	$(BIN)/python benchmarks/bench_simulate.py --results

# sam build needs python3.13 (the functions' runtime) on the PATH: use pyenv's when there is one.
# (`python3.13 -V`, not `command -v`: a pyenv shim is on the PATH even when 3.13 is not selected.)
PY313_DIR := $(shell python3.13 -V >/dev/null 2>&1 || ls -d $(HOME)/.pyenv/versions/3.13*/bin 2>/dev/null | tail -n 1)

build: $(SAM)
	PATH="$(if $(PY313_DIR),$(PY313_DIR):)$$PATH" $(SAM) build --template template.yaml

clean:
	rm -rf $(VENV) $(SAMVENV) $(CHECKOVVENV) $(MOTOVENV) .aws-sam .pytest_cache .mypy_cache .ruff_cache
