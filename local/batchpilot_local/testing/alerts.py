"""Alerts test support: facts from sample events, decoded the way the alerts service decodes an SQS
body (:func:`batchpilot.shared.records.decode_any`, then
:func:`batchpilot.alerts.facts.fact_from_event`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from batchpilot.alerts.facts import AlertFact, fact_from_event
from batchpilot.shared.records import Rejected, decode_any

__all__ = ["fact_of"]


def fact_of(event: Mapping[str, Any]) -> AlertFact:
    """The fact of an EventBridge event (a job event or one of batchpilot's own events).

    Raises:
        ValueError: the event is ignored or invalid (the message says why).
    """
    decoded = decode_any(json.dumps(event))
    if isinstance(decoded, Rejected):
        raise ValueError(f"{decoded.outcome.value}: {decoded.error}")
    return fact_from_event(decoded, event)
