"""The on-call SNS topic: publishes :class:`~batchpilot.alerts.render.SnsMessage` s with PublishBatch.

Up to 10 messages per ``PublishBatch`` call and at most 256 KiB per call (SNS's limits), each with
``Subject``, ``Message`` and ``MessageAttributes`` (``String``). ``PublishBatch`` is authorised by
the ``sns:Publish`` permission. Throttling and transient errors are retried by botocore (standard
mode, :func:`batchpilot.io.clients.client`); what still fails is reported per message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from batchpilot.alerts.render import SnsMessage

__all__ = ["SnsPublisher"]

_MAX_ENTRIES = 10
_MAX_BATCH_BYTES = 250_000  # below SNS's 262,144-byte aggregate limit, leaving room for overhead


def _size(message: SnsMessage) -> int:
    attributes = sum(len(k) + len(v.encode("utf-8")) + 6 for k, v in message.attributes.items())
    return len(message.body.encode("utf-8")) + len(message.subject) + attributes


class SnsPublisher:
    """Publishes to one topic: :class:`batchpilot.alerts.ports.OnCallTopic`.

    Args:
        client: a boto3 SNS client (``batchpilot.io.clients.client("sns")``).
        topic_arn: the on-call topic (``BATCHPILOT_ONCALL_TOPIC_ARN``).
    """

    def __init__(self, client: Any, topic_arn: str) -> None:
        self._client = client
        self.topic_arn = topic_arn

    def _chunks(self, messages: Sequence[SnsMessage]) -> list[list[int]]:
        chunks: list[list[int]] = []
        size = 0
        for index, message in enumerate(messages):
            item = _size(message)
            if not chunks or len(chunks[-1]) == _MAX_ENTRIES or size + item > _MAX_BATCH_BYTES:
                chunks.append([])
                size = 0
            chunks[-1].append(index)
            size += item
        return chunks

    def publish(self, messages: Sequence[SnsMessage]) -> list[str | None]:
        """Publish every message; returns, per message, None when SNS accepted it, else the error
        code (``InvalidParameter``, ``KMSAccessDenied``, ``AuthorizationError``, ...)."""
        results: list[str | None] = [None] * len(messages)
        for chunk in self._chunks(messages):
            entries = [
                {
                    "Id": str(position),
                    "Subject": messages[index].subject,
                    "Message": messages[index].body,
                    "MessageAttributes": {
                        name: {"DataType": "String", "StringValue": value}
                        for name, value in messages[index].attributes.items()
                    },
                }
                for position, index in enumerate(chunk)
            ]
            try:
                response = self._client.publish_batch(
                    TopicArn=self.topic_arn, PublishBatchRequestEntries=entries
                )
            except Exception as exc:  # botocore ClientError / EndpointConnectionError after retries
                code = (
                    getattr(exc, "response", {}).get("Error", {}).get("Code")
                    if hasattr(exc, "response")
                    else None
                )
                for index in chunk:
                    results[index] = str(code or type(exc).__name__)
                continue
            for failure in response.get("Failed", []):
                position = int(failure.get("Id", -1))
                if 0 <= position < len(chunk):
                    results[chunk[position]] = str(failure.get("Code") or "Failed")
        return results
