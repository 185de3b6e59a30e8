"""Fixtures of the template tests, once per test module: template.yaml parsed, and as the SAM
transform turns it into CloudFormation."""

from __future__ import annotations

from typing import Any

import pytest
from batchpilot_local.testing.paths import TEMPLATE_PATH
from batchpilot_local.testing.templates import parse_template, translate
from samtranslator.model.exceptions import InvalidDocumentException


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return parse_template(TEMPLATE_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def translated(template: dict[str, Any]) -> dict[str, Any]:
    try:
        return translate(template)
    except InvalidDocumentException as error:
        pytest.fail("SAM transform failed: " + "; ".join(cause.message for cause in error.causes))
