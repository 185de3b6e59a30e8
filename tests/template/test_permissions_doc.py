"""docs/permissions.md is what ``python -m batchpilot_local.iam.permissions`` produces from
template.yaml, and the deployer's tables behind it name only real IAM actions and every resource
type the stack creates."""

from __future__ import annotations

from batchpilot_local.iam import reference
from batchpilot_local.iam.permissions import DEPLOY_ACTIONS, HANDLER_PERMISSIONS, main, render
from batchpilot_local.iam.stack import translated
from batchpilot_local.testing.paths import ROOT, TEMPLATE_PATH

DOC = ROOT / "docs" / "permissions.md"


def test_the_page_is_what_the_script_produces() -> None:
    assert DOC.read_text(encoding="utf-8") == render(TEMPLATE_PATH), (
        "docs/permissions.md is out of date: run .venv/bin/python -m batchpilot_local.iam.permissions --write"
    )
    assert main(["--check", "--template", str(TEMPLATE_PATH), "--output", str(DOC)]) == 0


def test_check_fails_on_a_stale_page(tmp_path) -> None:  # type: ignore[no-untyped-def]
    stale = tmp_path / "permissions.md"
    stale.write_text(
        DOC.read_text(encoding="utf-8").replace("iam:PassRole", "iam:PassRoles"), encoding="utf-8"
    )
    assert main(["--check", "--template", str(TEMPLATE_PATH), "--output", str(stale)]) == 1


def test_every_resource_type_of_the_stack_has_its_handler_permissions() -> None:
    kinds = {resource["Type"] for resource in translated(TEMPLATE_PATH)["Resources"].values()}
    assert kinds and kinds <= set(HANDLER_PERMISSIONS), sorted(kinds - set(HANDLER_PERMISSIONS))
    for kind in kinds:
        assert HANDLER_PERMISSIONS[kind]["create/update"] and HANDLER_PERMISSIONS[kind]["delete"], kind


def test_every_deployer_action_is_in_the_service_authorization_reference() -> None:
    actions = {a for entry in HANDLER_PERMISSIONS.values() for group in entry.values() for a in group}
    actions |= {a for group in DEPLOY_ACTIONS.values() for a in group}
    assert len(actions) > 50
    for action in sorted(actions):
        assert reference.action(action).qualified == action, action


def test_the_page_lists_each_role_and_the_star_grants_with_their_reasons() -> None:
    page = render(TEMPLATE_PATH)
    for role in (
        "MetricsFunctionRole",
        "RecoveryFunctionRole",
        "AlertsFunctionRole",
        "CapacityFunctionRole",
        "LedgerFunctionRole",
    ):
        assert f"(`{role}`)" in page, role
    star = page.split('## Grants on `Resource: "*"`', 1)[1]
    rows = [line for line in star.splitlines() if line.startswith("| `")]
    assert rows and all("supports no resource-level permissions" in row for row in rows), rows
    assert "NOT JUSTIFIED" not in page
