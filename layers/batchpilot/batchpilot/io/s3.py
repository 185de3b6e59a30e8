"""Amazon S3, through an injected boto3 ``s3`` client, read-only: checkpoint prefixes for the
recovery function and the job ledger.

Implements :class:`batchpilot.recovery.ports.CheckpointStore` and
:class:`batchpilot.ledger.ports.CheckpointReader` with ListObjectsV2 (the only S3 permission
either function has: ``s3:ListBucket`` on the configured checkpoint buckets).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from batchpilot.shared.checkpoints import CheckpointListError, CheckpointLocation, CheckpointState

__all__ = ["S3Checkpoints"]

_PAGE_SIZE = 1000


class S3Checkpoints:
    """Finds the newest object under a checkpoint prefix.

    Args:
        client: a boto3 ``s3`` client.
        max_pages: ListObjectsV2 pages (1000 keys each) read per prefix at most.
    """

    def __init__(self, client: Any, max_pages: int = 20) -> None:
        self.client = client
        self.max_pages = max_pages

    def inspect(
        self, location: CheckpointLocation | None, written_by: datetime | None = None
    ) -> CheckpointState:
        """The newest object (``Key``, ``LastModified``) under ``location`` (ListObjectsV2,
        paginated, at most ``max_pages`` pages of 1000 keys).

        Args:
            location: the checkpoint location; ``None``: no checkpoint configured.
            written_by: only objects whose ``LastModified`` is at or before this (aware UTC)
                count, e.g. the stop of the attempt whose lost work is measured, so checkpoints
                the next attempt wrote since are not taken for its own; ``None``: every object.

        Raises:
            CheckpointListError: S3 refused or failed the listing (``AccessDenied``,
                ``NoSuchBucket``, throttling after botocore's retries, a connection error): the
                caller retries; a failed listing is never "no checkpoint".
        """
        if location is None:
            return CheckpointState(None)
        newest: datetime | None = None
        newest_key: str | None = None
        count = 0
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=location.bucket,
                Prefix=location.prefix,
                PaginationConfig={"MaxItems": self.max_pages * _PAGE_SIZE, "PageSize": _PAGE_SIZE},
            )
            for page in pages:
                for item in page.get("Contents") or []:
                    count += 1
                    modified = item.get("LastModified")
                    if not isinstance(modified, datetime) or (
                        written_by is not None and modified > written_by
                    ):
                        continue
                    if newest is None or modified > newest:
                        newest = modified
                        newest_key = str(item.get("Key") or "") or None
        except ClientError as exc:
            raise CheckpointListError(str(exc.response.get("Error", {}).get("Code") or "Unknown")) from None
        except BotoCoreError as exc:
            raise CheckpointListError(type(exc).__name__) from None
        return CheckpointState(location, newest, count, newest_key=newest_key)
