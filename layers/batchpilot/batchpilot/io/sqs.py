"""Amazon SQS, through an injected boto3 ``sqs`` client: delaying a record that a function hands
back to its queue (:class:`SqsDeferrer`, the recovery function's
:class:`batchpilot.recovery.ports.Deferrer`), and the alerts function's delayed message to its own
queue (:class:`SqsTimer`, :class:`batchpilot.alerts.ports.IncidentTimer`: an incident's summary).

A record reported as a batch item failure becomes visible again after the queue's visibility
timeout; ``ChangeMessageVisibility`` on its receipt handle makes it visible when it is due instead
(SQS Developer Guide, "Amazon SQS visibility timeout": at most 12 hours).
"""

from __future__ import annotations

import math
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.recovery.ports import DeferError

__all__ = ["MAX_DELAY_S", "MAX_VISIBILITY_S", "SqsDeferrer", "SqsTimer"]

MAX_VISIBILITY_S = 43_200
"""SQS's longest visibility timeout, in seconds (12 hours)."""
MAX_DELAY_S = 900
"""SQS's longest ``DelaySeconds`` of a message (15 minutes: SQS Developer Guide, "Amazon SQS
message timers")."""


class SqsTimer:
    """Sends delayed messages to one queue (``SendMessage`` with ``DelaySeconds``).

    Args:
        client: a boto3 ``sqs`` client (``batchpilot.io.clients.client("sqs")``).
        queue_url: the queue's URL (the alerts queue).
    """

    def __init__(self, client: Any, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send_later(self, body: str, delay_seconds: int) -> None:
        """``SendMessage`` of ``body``, visible after ``delay_seconds`` (clamped to 0..900).

        Raises:
            botocore ``ClientError`` / ``BotoCoreError``: SQS refused, or could not be reached
            after botocore's retries (the caller's record is retried).
        """
        delay = max(0, min(MAX_DELAY_S, int(delay_seconds)))
        self._client.send_message(QueueUrl=self._queue_url, MessageBody=body, DelaySeconds=delay)


class SqsDeferrer:
    """Sets the visibility of records of one queue.

    Args:
        client: a boto3 ``sqs`` client (``batchpilot.io.clients.client("sqs")``).
        queue_url: the queue's URL; None leaves every record to the queue's visibility timeout.
    """

    def __init__(self, client: Any, queue_url: str | None) -> None:
        self._client = client
        self._queue_url = queue_url

    def defer(self, receipt_handle: str, seconds: float) -> bool:
        """``ChangeMessageVisibility`` to ``seconds`` (rounded up, clamped to 0..43,200).

        Returns:
            False when no queue URL is configured (nothing was changed).

        Raises:
            DeferError: SQS refused, or could not be reached after botocore's retries.
        """
        if self._queue_url is None:
            return False
        timeout = max(0, min(MAX_VISIBILITY_S, math.ceil(seconds)))
        try:
            self._client.change_message_visibility(
                QueueUrl=self._queue_url, ReceiptHandle=receipt_handle, VisibilityTimeout=timeout
            )
        except ClientError as exc:
            raise DeferError(str(exc.response.get("Error", {}).get("Code") or "Unknown")) from None
        except BotoCoreError as exc:
            raise DeferError(type(exc).__name__) from None
        return True
