# batchpilot: `make run` and `make test` do all set-up themselves on a fresh machine.
# Python 3.11 to 3.13; the venv uses `python3` unless PYTHON is given.
# Exact versions of every dependency: constraints.txt (`make constraints` regenerates it from
# pyproject.toml's ranges); uv, pinned there too, installs them into .venv.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
CONSTRAINTS := constraints.txt
SAMVENV := .venv-sam
BIN := $(VENV)/bin
UV := $(BIN)/uv
SAM := $(SAMVENV)/bin/sam
SAM_CLI_VERSION := 1.170.0
CHECKOVVENV := .venv-checkov
CHECKOV := $(CHECKOVVENV)/bin/checkov
CHECKOV_VERSION := 3.3.30
export AWS_DEFAULT_REGION ?= us-east-1
export SAM_CLI_TELEMETRY := 0

.PHONY: run test lint typecheck validate security unit bench build wheel constraints clean help simulate docs docs-images report-screenshot test-moto-latest

help:
	@echo "make run    - set up what running needs (runtime dependencies only) and replay every sample event in"
	@echo "              events/, as samconfig.toml's default environment deploys it; RUN_PARAMETERS='K=V ...' adds"
	@echo "              template parameters, e.g. RUN_PARAMETERS='SlackWebhookSecretArn=<ARN>' for Slack"
	@echo "make test   - set up the dev toolchain too and run every check (ruff, mypy, sam validate --lint, checkov, docs, pytest)"
	@echo "make security - checkov on template.yaml (skipped checks and their reasons: .checkov.yaml)"
	@echo "make test-moto-latest - the embedded-AWS tests against the newest moto the project allows (a venv of its own)"
	@echo "make bench  - run the benchmarks in benchmarks/ (bench_cost.py rewrites benchmarks/cost.json and docs/cost.md)"
	@echo "make simulate - the article's experiment: per-team reserves vs one shared pool (fair share, quota, FIFO)"
	@echo "make build  - sam build (needs python3.13: on the PATH or in ~/.pyenv/versions)"
	@echo "make wheel  - build dist/batchpilot-<version>-py3-none-any.whl (pip install / pipx install it anywhere)"
	@echo "make constraints - re-pin constraints.txt after a change to pyproject.toml's dependencies"
	@echo "make docs   - build the documentation site (MkDocs, strict: a broken link, anchor or nav entry fails) into site/"
	@echo "make docs-images - redraw docs/img/*.png from replayed samples (needs /usr/bin/chromium)"

# The venv and its installer, uv (from PyPI, at constraints.txt's pin), once. The venv needs no pip
# of its own (uv installs the rest): the host's pip (22.3 or later: --python) installs uv into it;
# without one, the venv's bundled pip does (ensurepip: slower).
$(UV):
	$(PYTHON) -m venv --without-pip $(VENV)
	if $(PYTHON) -m pip --python $(BIN)/python --version >/dev/null 2>&1; then \
	  $(PYTHON) -m pip --python $(BIN)/python install --quiet -c $(CONSTRAINTS) uv; \
	else \
	  $(BIN)/python -m ensurepip --default-pip && $(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) uv; \
	fi

# Two stamps: .installed-run (the runtime dependencies and the package, editable: what `make run`
# needs) and .installed (that plus the dev toolchain: what `make test` needs). .installed depends on
# .installed-run, so a change to either input rebuilds both in order, and `make run` after
# `make test` (or the reverse) installs only what is missing.
$(BIN)/.installed-run: pyproject.toml $(CONSTRAINTS) layers/batchpilot/requirements.txt | $(UV)
	$(UV) pip install --quiet --python $(BIN)/python -c $(CONSTRAINTS) -e .
	touch $@

$(BIN)/.installed: $(BIN)/.installed-run
	$(UV) pip install --quiet --python $(BIN)/python -c $(CONSTRAINTS) -e '.[dev]'
	touch $@

# constraints.txt from pyproject.toml's ranges, for every platform and Python >= 3.11, keeping the
# current pins where they still fit (`make constraints UPGRADE=--upgrade` takes the newest).
constraints: | $(UV)
	$(UV) pip compile pyproject.toml --extra dev --universal --python-version 3.11 --quiet \
	  --custom-compile-command "make constraints" $(UPGRADE) -o $(CONSTRAINTS)

wheel: | $(UV)
	$(UV) build --wheel --out-dir dist .

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

# The replay is the deployment: samconfig.toml's default environment, as `sam deploy` creates it (no
# chat channel: every message goes to the on-call topic). RUN_PARAMETERS adds parameters on top, as
# --parameter-overrides (the report's header says what was replayed).
RUN_PARAMETERS ?=
run: $(BIN)/.installed-run
	$(BIN)/batchpilot replay --config-env default $(if $(RUN_PARAMETERS),--parameter-overrides '$(RUN_PARAMETERS)') events/

# The documentation's pictures (docs/img/), drawn by the replay's HTML report in headless Chromium
# (Debian's chromium; the chat previews' emoji need fonts-noto-color-emoji):
# - replay-report.png: the report's first screens, from a few samples (two capacity scenarios a day
#   apart, a resubmission, a page, a fair-share fleet; Slack and Teams on);
# - dashboard.png: the first widgets of the fleet dashboard, drawn from the same replay;
# - chat-message.png: the Slack and Teams messages of a failed training job (a routing policy that
#   sends every severity to both chat channels, so the two previews stand side by side).
SCREENSHOT_INPUTS := events/scenarios/capacity/burst.json events/scenarios/capacity/quiet-night.json \
  events/scenarios/recovery/container-job-spot-reclaimed.json events/service-job/failed-algorithm-error.json \
  events/scenarios/ledger/fair-share-fleet.json
SCREENSHOT_TEAMS := TeamsWebhookSecretArn=arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot-teams-AbCdEf \
  SlackWebhookSecretArn=arn:aws:secretsmanager:us-east-1:111122223333:secret:batchpilot-slack-AbCdEf
SCREENSHOT_CHAT := "AlertRoutingPolicy='{\"channels\":{\"critical\":[\"slack\",\"teams\"],\"warning\":[\"slack\",\"teams\"],\"info\":[\"slack\",\"teams\"]}}'"
SCREENSHOT := $(BIN)/python -m batchpilot_local.testing.browser
docs-images: $(BIN)/.installed
	@mkdir -p .aws-sam docs/img
	$(BIN)/batchpilot replay --format json --parameter-overrides '$(SCREENSHOT_TEAMS)' \
	  --report .aws-sam/replay-report.html $(SCREENSHOT_INPUTS) > /dev/null
	$(SCREENSHOT) .aws-sam/replay-report.html docs/img/replay-report.png 3000
	$(SCREENSHOT) .aws-sam/replay-report.html docs/img/dashboard.png \
	  --part h3 --containing 'Dashboard FleetDashboard' --siblings 3
	$(BIN)/batchpilot replay --format json --parameter-overrides '$(SCREENSHOT_TEAMS)' --parameter-overrides $(SCREENSHOT_CHAT) \
	  --report .aws-sam/chat-report.html events/service-job/failed-algorithm-error.json > /dev/null
	$(SCREENSHOT) .aws-sam/chat-report.html docs/img/chat-message.png \
	  --part .msg.slack --containing phi3-sft-run5 --siblings 1

report-screenshot: docs-images

simulate: $(BIN)/.installed-run
	$(BIN)/batchpilot simulate --compare events/simulate/article-before-per-team.yaml \
		events/simulate/article-after-shared.yaml events/simulate/article-after-quota.yaml \
		events/simulate/article-fifo.yaml

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

# The documentation site (mkdocs.yml: docs/ plus ARCHITECTURE.md and benchmarks/README.md): strict,
# so a link to a missing page or anchor, or a page left out of the nav, fails the build.
docs: $(BIN)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

unit: $(BIN)/.installed $(SAM)
	SAM_CLI=$(abspath $(SAM)) $(BIN)/python -m pytest

test: lint typecheck validate security docs unit

# The embedded AWS against the newest moto release pyproject.toml's range allows (moto floats
# within its major version), in a venv of its own so that .venv keeps its moto: the emulator's
# tests, the moto fixes' and the contract tests. CI runs it after `make test`.
MOTOVENV := .venv-moto-latest
EMBEDDED_AWS_TESTS := tests/integration/test_emulator.py tests/integration/test_emulator_quota_shares.py \
  tests/integration/test_moto_fixes.py tests/aws
MOTO_REQUIREMENT := from importlib.metadata import requires; \
  print(next(r for r in requires("batchpilot") if r.startswith("moto")))
test-moto-latest: | $(UV)
	rm -rf $(MOTOVENV)
	$(PYTHON) -m venv --without-pip $(MOTOVENV)
	@mkdir -p .aws-sam
	grep -v '^moto==' $(CONSTRAINTS) > .aws-sam/constraints-but-moto.txt
	$(UV) pip install --quiet --python $(MOTOVENV)/bin/python -c .aws-sam/constraints-but-moto.txt -e '.[dev]'
	$(UV) pip install --quiet --python $(MOTOVENV)/bin/python -c .aws-sam/constraints-but-moto.txt --upgrade \
	  "$$($(MOTOVENV)/bin/python -c '$(MOTO_REQUIREMENT)')"
	@$(MOTOVENV)/bin/python -c 'from importlib.metadata import version; print("test-moto-latest: moto", version("moto"))'
	$(MOTOVENV)/bin/python -m pytest -p no:cacheprovider $(EMBEDDED_AWS_TESTS)

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_metrics_handler.py
	$(BIN)/python benchmarks/bench_cold_start.py
	$(BIN)/python benchmarks/bench_alerts.py
	$(BIN)/python benchmarks/bench_recovery.py
	$(BIN)/python benchmarks/bench_capacity.py
	$(BIN)/python benchmarks/bench_simulate.py --results
	$(BIN)/python benchmarks/bench_cli_startup.py --results
	$(BIN)/python benchmarks/bench_cost.py

# sam build needs python3.13 (the functions' runtime) on the PATH: use pyenv's when there is one.
# (`python3.13 -V`, not `command -v`: a pyenv shim is on the PATH even when 3.13 is not selected.)
PY313_DIR := $(shell python3.13 -V >/dev/null 2>&1 || ls -d $(HOME)/.pyenv/versions/3.13*/bin 2>/dev/null | tail -n 1)

build: $(SAM)
	PATH="$(if $(PY313_DIR),$(PY313_DIR):)$$PATH" $(SAM) build --template template.yaml

clean:
	rm -rf $(VENV) $(SAMVENV) $(CHECKOVVENV) $(MOTOVENV) .aws-sam site .pytest_cache .mypy_cache .ruff_cache dist
