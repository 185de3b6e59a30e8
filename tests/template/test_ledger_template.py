"""The ledger function's role lists checkpoint prefixes (``LostInstanceHours`` from the newest
checkpoint) exactly where the recovery function may, and nothing more of S3."""

from __future__ import annotations

from typing import Any

from batchpilot_local.testing.templates import as_list, props


def role_statements(template: dict[str, Any], role: str) -> list[dict[str, Any]]:
    """The statements of the role's first (unconditional) policy."""
    policy = props(template, role, "AWS::IAM::Role")["Policies"][0]
    statements: list[dict[str, Any]] = policy["PolicyDocument"]["Statement"]
    return statements


def by_sid(statements: list[dict[str, Any]], sid: str) -> dict[str, Any]:
    (found,) = [s for s in statements if s.get("Sid") == sid]
    return found


def test_ledger_lists_the_same_checkpoint_prefixes_as_recovery(template: dict[str, Any]) -> None:
    ledger = role_statements(template, "LedgerFunctionRole")
    recovery = role_statements(template, "RecoveryFunctionRole")
    # Same buckets, same key prefixes, same parameters: one place to narrow both.
    assert by_sid(ledger, "ListCheckpointPrefixes") == by_sid(recovery, "ListCheckpointPrefixes")
    s3 = [a for s in ledger for a in as_list(s["Action"]) if a.startswith("s3:")]
    assert s3 == ["s3:ListBucket"]  # never GetObject or PutObject
