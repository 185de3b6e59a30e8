"""Every table keyed by an enum covers the enum: a new member (a failure category, a severity, a job
kind, an outcome...) fails here, naming each table that must say what it does for it.

A table keyed by an enum either holds every member, or holds some and names the others as left out
on purpose (with the reason, and what happens to them instead). A test at the bottom scans the
layer for dictionaries keyed by enum members, so a new table is listed here too."""

from __future__ import annotations

import ast
from collections.abc import Collection
from dataclasses import dataclass, replace
from enum import Enum

import pytest
from batchpilot.alerts import amazon_q, handler, owners, render
from batchpilot.alerts.channels import teams
from batchpilot.alerts.facts import FactKind
from batchpilot.alerts.policy import RoutingPolicy, Severity
from batchpilot.alerts.service import Suppressed
from batchpilot.alerts.severity import decide
from batchpilot.ledger.model import RANK, JobStatus
from batchpilot.recovery import policy as recovery_policy
from batchpilot.recovery.settings import BUDGET_CATEGORIES, DEFAULT_BUDGETS
from batchpilot.shared.classification import RECOVERABLE, Category, JobKind
from batchpilot.shared.observability import COUNTERS
from batchpilot.shared.records import Outcome
from batchpilot_local.testing.alerts import fact_of
from batchpilot_local.testing.paths import ROOT
from batchpilot_local.testing.samples import sample

LAYER = ROOT / "layers" / "batchpilot" / "batchpilot"

RECOVERABLE_CATEGORIES = frozenset(BUDGET_CATEGORIES)
"""The categories recovery may act on (each with a budget); the others are never resubmitted."""


@dataclass(frozen=True)
class Table:
    """A table keyed by ``enum``; ``left_out``: the members it leaves out on purpose."""

    name: str
    """``module:name`` (the assignment, or the function that returns the table)."""
    table: Collection[Enum]
    enum: type[Enum]
    left_out: frozenset[Enum] = frozenset()
    why: str = ""


TABLES = [
    Table("shared/classification.py:RECOVERABLE", RECOVERABLE, JobKind),
    Table("shared/observability.py:COUNTERS", COUNTERS, Outcome),
    Table("ledger/model.py:RANK", RANK, JobStatus),
    Table("alerts/render.py:EMOJI", render.EMOJI, Severity),
    Table("alerts/render.py:_KIND_LABEL", render._KIND_LABEL, JobKind),
    Table("alerts/channels/teams.py:_COLOR", teams._COLOR, Severity),
    Table("alerts/handler.py:_SUPPRESSED", handler._SUPPRESSED, Suppressed),
    Table("alerts/owners.py:_MENTIONS", owners._MENTIONS, FactKind),
    Table(
        "alerts/amazon_q.py:_MARK",
        amazon_q._MARK,
        Severity,
        frozenset({Severity.INFO, Severity.SILENT}),
        "every other severity shows the blue circle (render's fallback)",
    ),
    Table(
        "alerts/policy.py:_default_channels",
        RoutingPolicy().channels,
        Severity,
        frozenset({Severity.SILENT}),
        "silent goes nowhere",
    ),
    Table(
        "recovery/policy.py:_WHY_NOT",
        recovery_policy._WHY_NOT,
        Category,
        RECOVERABLE_CATEGORIES,
        "recovery resubmits for these (within a budget): no reason not to",
    ),
    Table(
        "recovery/settings.py:DEFAULT_BUDGETS",
        DEFAULT_BUDGETS,
        Category,
        frozenset(Category) - RECOVERABLE_CATEGORIES,
        "never resubmitted: recovery/policy.py's _WHY_NOT says why",
    ),
]


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_every_enum_keyed_table_covers_its_enum(table: Table) -> None:
    keys = set(table.table)
    assert keys, f"{table.name} is empty"
    assert keys <= set(table.enum), f"{table.name} has keys outside {table.enum.__name__}"
    assert not keys & table.left_out, (
        f"{table.name} holds members listed as left out: {keys & table.left_out}"
    )
    missing = set(table.enum) - keys - table.left_out
    assert not missing, (
        f"{table.name} says nothing of {sorted(m.name for m in missing)}: add them to the table, "
        f"or to its left-out members here with the reason"
    )


def test_recovery_resubmits_each_kind_only_for_categories_with_a_budget() -> None:
    assert set(DEFAULT_BUDGETS) == RECOVERABLE_CATEGORIES
    kinds = {kind: categories for kind, categories in RECOVERABLE.items() if categories}
    assert set(kinds) == set(JobKind)
    assert set().union(*kinds.values()) <= RECOVERABLE_CATEGORIES


# The alerts severity table (alerts/severity.py) decides by category with a default row ("any other
# terminal failure"): the severity it gives each category, written out so a new category is decided.
# Columns: a FAILED service job (recovery resubmits four categories: info), a FAILED container job
# (resubmitted only after a spot reclaim), a blocked job queue (critical when it never runs by itself).
C, W, INFO = Severity.CRITICAL, Severity.WARNING, Severity.INFO
FACTS = (
    "service-job/failed-algorithm-error",
    "batch-job/failed-application-error",
    "service-job-queue-blocked/undetermined",
)
SEVERITY_BY_CATEGORY: dict[Category, tuple[Severity, Severity, Severity]] = {
    Category.SPOT_INTERRUPTION: (INFO, INFO, W),
    Category.PREEMPTION: (INFO, C, W),
    Category.CAPACITY: (INFO, C, W),
    Category.MISCONFIGURATION: (C, C, C),
    Category.TIMEOUT: (W, W, W),
    Category.USER_STOPPED: (INFO, INFO, W),
    Category.APPLICATION_ERROR: (C, C, W),
    Category.OUT_OF_MEMORY: (C, C, W),
    Category.QUOTA: (C, C, C),
    Category.INTERNAL_ERROR: (INFO, C, W),
    Category.UNKNOWN: (C, C, W),
}


def test_the_severity_table_names_every_category() -> None:
    assert set(SEVERITY_BY_CATEGORY) == set(Category), "say which severity each category gets"


@pytest.mark.parametrize("column", range(len(FACTS)), ids=FACTS)
def test_the_severity_table_decides_every_category(column: int) -> None:
    fact = fact_of(sample(FACTS[column]))
    assert fact.job is not None
    decided = {
        category: decide(replace(fact, job=replace(fact.job, category=category)), RoutingPolicy()).severity
        for category in Category
    }
    assert decided == {category: row[column] for category, row in SEVERITY_BY_CATEGORY.items()}


def test_the_metrics_page_lists_the_closed_set_of_categories() -> None:
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    start = text.index("take one value of the closed set")
    listed = text[start : text.index("decided from", start)]
    assert {c.value for c in Category if f"`{c.value}`" in listed} == {c.value for c in Category}


def _enum_names() -> set[str]:
    names = set()
    for path in LAYER.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(base, ast.Name) and base.id in {"Enum", "StrEnum", "IntEnum"}
                for base in node.bases
            ):
                names.add(node.name)
    return names


def _enum_keyed_tables(source: str, enums: set[str]) -> list[str]:
    """The name of each dictionary display in ``source`` keyed by members of ``enums``
    (``Enum.MEMBER: ...``): the name it is assigned to, else the function that builds it."""
    found = []

    def visit(node: ast.AST, owner: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            owner = node.name
        elif isinstance(node, ast.Assign | ast.AnnAssign) and owner == "":
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if names:
                for child in ast.iter_child_nodes(node):
                    visit(child, names[0])
                return
        if isinstance(node, ast.Dict) and any(
            isinstance(key, ast.Attribute) and isinstance(key.value, ast.Name) and key.value.id in enums
            for key in node.keys
        ):
            found.append(owner)
        for child in ast.iter_child_nodes(node):
            visit(child, owner)

    visit(ast.parse(source), "")
    return found


def test_the_table_scan_finds_assigned_and_returned_tables() -> None:
    source = (
        "A = {E.X: 1}\nB: dict[E, int] = {E.X: 1, E.Y: 2}\ndef f():\n    return {E.X: 1}\n"
        "C = {'x': 1}\nD = {F.X: 1}\n"
    )
    assert _enum_keyed_tables(source, {"E"}) == ["A", "B", "f"]


def test_every_enum_keyed_table_of_the_layer_is_listed_here() -> None:
    enums = _enum_names()
    assert {"Category", "Severity", "JobKind", "Outcome", "Channel"} <= enums
    found = {
        f"{path.relative_to(LAYER)}:{name}"
        for path in sorted(LAYER.rglob("*.py"))
        for name in _enum_keyed_tables(path.read_text(encoding="utf-8"), enums)
    }
    assert found, "the scan found no table at all"
    assert found == {t.name for t in TABLES}, "list each table in TABLES (with what it leaves out on purpose)"


@pytest.mark.parametrize("table", TABLES, ids=[t.name for t in TABLES])
def test_what_a_table_leaves_out_is_of_its_enum_and_says_why(table: Table) -> None:
    assert table.left_out <= set(table.enum)
    assert bool(table.left_out) == bool(table.why), f"{table.name}: say why members are left out"
