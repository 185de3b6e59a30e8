"""Rules the tests themselves keep, each a test: property tests that fail the same way everywhere,
assertions that cannot pass on nothing."""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TypeGuard

import pytest
from batchpilot_local.testing.durations import level, slowest_by_level
from batchpilot_local.testing.paths import ROOT
from hypothesis import settings

TESTS = ROOT / "tests"


@cache
def _test_sources() -> list[tuple[Path, ast.Module]]:
    """Every Python file under tests/, parsed (once per run)."""
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(TESTS.rglob("*.py"))]


def test_hypothesis_runs_derandomised_unless_the_dev_profile_is_asked_for() -> None:
    ci, dev = settings.get_profile("ci"), settings.get_profile("dev")
    assert ci.derandomize is True and ci.deadline is None and ci.print_blob is True
    assert dev.derandomize is False  # random: new seeds locally
    chosen = settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
    current = settings.default
    assert current is not None
    assert current.derandomize is chosen.derandomize
    assert current.deadline == chosen.deadline


def _settings_keywords(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, keyword) of every keyword passed to a call of ``settings(...)`` (hypothesis' decorator
    or object) in ``tree``."""
    return [
        (node.lineno, keyword.arg or "**")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "settings")
            or (isinstance(node.func, ast.Attribute) and node.func.attr == "settings")
        )
        for keyword in node.keywords
    ]


def test_no_property_test_chooses_its_own_randomness() -> None:
    # The profile decides (tests/conftest.py): derandomised in CI, random with HYPOTHESIS_PROFILE=dev.
    sources = _test_sources()
    assert len(sources) > 100
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: settings({keyword}=...)"
        for path, tree in sources
        if path.name != "conftest.py"
        for line, keyword in _settings_keywords(tree)
        if keyword in {"derandomize", "database", "print_blob"}
    ]
    assert offenders == [], "leave these to the profile in tests/conftest.py:\n" + "\n".join(offenders)
    assert _settings_keywords(ast.parse("@settings(max_examples=3, derandomize=True)\ndef f(): ...")) == [
        (1, "max_examples"),
        (1, "derandomize"),
    ]


_VIEWS = {"set", "sorted", "list", "tuple", "frozenset", "dict", "Counter", "enumerate", "reversed"}


def _iterated(node: ast.expr) -> ast.expr:
    """What ``node`` iterates over: ``xs`` for ``xs``, ``sorted(xs)``, ``xs.items()``, ``enumerate(xs)``..."""
    while True:
        if _call_of(node, _VIEWS) and node.args:
            node = node.args[0]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in {"items", "values", "keys"}
        ):
            node = node.func.value
        else:
            return node


def _call_of(node: ast.AST, functions: set[str]) -> TypeGuard[ast.Call]:
    """``node`` calls one of the builtins ``functions`` by name."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions


def _conjuncts(test: ast.expr) -> list[ast.expr]:
    """The operands of ``a and b and ...``, else ``[test]``."""
    return test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]


def _over(node: ast.expr) -> ast.expr | None:
    """For a comprehension, what its first ``for`` iterates over; else ``node`` itself."""
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        return _iterated(node.generators[0].iter)
    return _iterated(node)


def _non_empty_literal(node: ast.expr) -> bool:
    """A display with elements, ``range(<constants>)`` that is not empty, or a comprehension over one."""
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return bool(node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys)
    if isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp):
        unfiltered = not any(g.ifs for g in node.generators)
        return unfiltered and _non_empty_literal(_iterated(node.generators[0].iter))
    if _call_of(node, {"range"}):
        constants = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
        return len(constants) == len(node.args) > 0 and len(range(*constants)) > 0
    return False


def _is(node: ast.expr | None, names: set[str]) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _mentions(node: ast.expr, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _says_non_empty(test: ast.expr, names: set[str], local: frozenset[str] = frozenset()) -> bool:
    """True when the assertion ``test`` fails if the list (any of ``names``: the list and what is
    built by iterating it) is empty: the list alone as a conjunct, ``len`` / ``max`` / ``min`` of it,
    ``list[<constant>]``, ``x in list``, ``set(list) >= / > S`` with ``S`` a non-empty display or a
    module's constant (a name not in ``local``), or an equality between it (or a comprehension over
    it) and anything but an empty display, or between an expression naming it and a non-empty
    display."""
    if any(_is(c, names) for c in _conjuncts(test)):
        return True
    for node in ast.walk(test):
        if _call_of(node, {"len", "max", "min"}) and any(_is(_iterated(arg), names) for arg in node.args):
            return True
        if (
            isinstance(node, ast.Subscript)
            and _is(node.value, names)
            and isinstance(node.slice, ast.Constant)
        ):
            return True
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, sides[:-1], sides[1:], strict=True):
            if isinstance(op, ast.In) and _is(_iterated(right), names):
                return True
            if isinstance(op, ast.Gt | ast.GtE) and _is(_over(left), names):
                constant = isinstance(right, ast.Name) and right.id not in local
                if isinstance(op, ast.Gt) or constant or _non_empty_literal(right):
                    return True
            if not isinstance(op, ast.Eq):
                continue
            for one, other in ((left, right), (right, left)):
                display = isinstance(other, ast.List | ast.Tuple | ast.Set | ast.Dict)
                empty = display and not _non_empty_literal(other)
                if _is(_over(one), names) and not empty:
                    return True
                if _mentions(one, names) and _non_empty_literal(other):
                    return True
    return False


def _fails_when_empty(statement: ast.stmt, names: set[str]) -> bool:
    """A statement outside assertions that raises for an empty list: ``xs[0]``, ``[x] = xs``,
    ``a, b = xs``, ``max(xs)`` / ``min(xs)``, ``next(iter(xs))``."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Subscript) and _is(node.value, names):
            index = node.slice
            if isinstance(index, ast.Constant) or (
                isinstance(index, ast.UnaryOp) and isinstance(index.operand, ast.Constant)
            ):
                return True
        if (
            isinstance(node, ast.Assign)
            and _is(node.value, names)
            and any(isinstance(t, ast.Tuple | ast.List) and t.elts for t in node.targets)
        ):
            return True
        if _call_of(node, {"max", "min"}) and len(node.args) == 1 and _is(_iterated(node.args[0]), names):
            return True
        if _call_of(node, {"next"}) and node.args:
            inner = node.args[0]
            if _call_of(inner, {"iter"}) and inner.args and _is(_over(inner.args[0]), names):
                return True
    return False


def _module_literals(tree: ast.Module) -> set[str]:
    """Module-level names assigned a non-empty display."""
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _non_empty_literal(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def _shown_non_empty(
    function: ast.FunctionDef, name: str, checked: list[ast.AST], literals: set[str]
) -> bool:
    """Whether something in ``function`` fails for an empty ``name``, beside the ``checked``
    statements themselves (the loop, or the assertion ``all(...)`` is in): an assertion that shows it
    (or a list built by iterating it) non-empty (:func:`_says_non_empty`), a statement that raises
    for an empty one (:func:`_fails_when_empty`), or its value being a non-empty display."""
    assigned: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
    parameters = {a.arg for a in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]}
    if name not in parameters and name not in assigned:
        return True  # a module's constant or an import: fixed data, not a result
    values = assigned.get(name, [])
    if (values and all(_non_empty_literal(v) for v in values)) or (not values and name in literals):
        return True
    names = {name}  # the list, and every list built by iterating it (non-empty only if it is)
    for _ in range(3):
        names |= {
            other for other, built in assigned.items() if len(built) == 1 and _is(_over(built[0]), names)
        }
    inside = {id(node) for statement in checked for node in ast.walk(statement)}
    asserts = [node for node in ast.walk(function) if isinstance(node, ast.Assert) and id(node) not in inside]
    local = frozenset(parameters | set(assigned))
    if any(_says_non_empty(statement.test, names, local) for statement in asserts):
        return True
    outside = [
        s
        for s in function.body
        if not isinstance(s, ast.Assert) and not (isinstance(s, ast.For) and _is(_over(s.iter), names))
    ]
    return any(_fails_when_empty(s, names) for s in outside)


def _tests(tree: ast.Module) -> list[ast.FunctionDef]:
    return [
        node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name.startswith("test")
    ]


def _vacuous_alls(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each ``assert all(... for x in name)`` in a test function (``name`` a plain
    variable) with nothing in the function that fails for an empty ``name``
    (:func:`_shown_non_empty`; ``assert name and all(...)`` too). A parameter of the test is judged
    like any other list."""
    literals = _module_literals(tree)
    found = []
    for function in _tests(tree):
        for statement in [node for node in ast.walk(function) if isinstance(node, ast.Assert)]:
            conjuncts = _conjuncts(statement.test)
            for position, conjunct in enumerate(conjuncts):
                if not (
                    _call_of(conjunct, {"all"})
                    and len(conjunct.args) == 1
                    and isinstance(conjunct.args[0], ast.GeneratorExp | ast.ListComp)
                    and isinstance(conjunct.args[0].generators[0].iter, ast.Name)
                ):
                    continue
                name = conjunct.args[0].generators[0].iter.id
                earlier = ast.BoolOp(op=ast.And(), values=conjuncts[:position])
                if position and _says_non_empty(earlier, {name}):
                    continue
                if not _shown_non_empty(function, name, [statement], literals):
                    found.append((statement.lineno, name))
    return found


def _vacuous_loops(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each ``for x in name:`` (``name``, ``name.items()``, ``sorted(name)``...) at
    the top of a test function whose body asserts, with nothing in the function that fails for an
    empty ``name`` (:func:`_shown_non_empty`). Loops nested in another loop are not judged (an inner
    list may be empty for some elements), nor Hypothesis tests (an empty list is one of the examples)."""
    literals = _module_literals(tree)
    found = []
    for function in _tests(tree):
        if any(_call_of(d, {"given"}) for d in function.decorator_list):
            continue
        for loop in function.body:
            if not isinstance(loop, ast.For) or not any(isinstance(n, ast.Assert) for n in ast.walk(loop)):
                continue
            iterated = _over(loop.iter)
            if isinstance(iterated, ast.Name) and not _shown_non_empty(
                function, iterated.id, [loop], literals
            ):
                found.append((loop.lineno, iterated.id))
    return found


def test_the_vacuous_all_check_sees_what_shows_a_list_non_empty() -> None:
    source = (
        "def test_a(xs):\n    assert all(x > 0 for x in xs)\n"  # 2: flagged
        "def test_b(xs):\n    assert xs and all(x > 0 for x in xs)\n"
        "def test_c(xs):\n    assert len(xs) == 3\n    assert all(x > 0 for x in xs)\n"
        "def test_d(xs):\n    assert sorted(xs) == [1, 2]\n    assert all(x > 0 for x in xs)\n"
        "def test_e():\n    xs = [1, 2]\n    assert all(x > 0 for x in xs)\n"
        "def test_f(xs):\n    assert max(xs) == 4\n    assert all(x > 0 for x in xs)\n"
        "def test_g(xs):\n    assert xs != None\n    assert all(x > 0 for x in xs)\n"  # 19: flagged
        "def test_h(xs):\n    assert all(x > 0 for x in xs) and xs\n"  # 21: flagged (too late)
        "def test_i(o):\n    assert all(x > 0 for x in o.xs)\n"  # an attribute: not judged
        "def test_j(xs):\n    assert [x.a for x in xs] == [1]\n    assert all(x > 0 for x in xs)\n"
        "def test_k(xs):\n    ys = [x for x in xs if x]\n    assert ys\n    assert all(x > 0 for x in xs)\n"
        "def test_l(xs):\n    first = xs[0]\n    assert all(x > 0 for x in xs)\n"
        "def test_m(xs):\n    assert xs == []\n    assert all(x > 0 for x in xs)\n"  # 36: flagged
        "def test_n(xs, y):\n    assert y in xs\n    assert all(x > 0 for x in xs)\n"
        "def test_o():\n    xs = [f(i) for i in range(9)]\n    assert all(x > 0 for x in xs)\n"
        "def test_p():\n    xs = [f(i) for i in range(0)]\n    assert all(x > 0 for x in xs)\n"  # 45: flagged
    )
    assert _vacuous_alls(ast.parse(source)) == [(2, "xs"), (19, "xs"), (21, "xs"), (36, "xs"), (45, "xs")]


def test_the_vacuous_loop_check_judges_top_level_loops_over_local_lists() -> None:
    source = (
        "def test_a(xs):\n    for x in xs:\n        assert x\n"  # 2: flagged
        "def test_b(xs):\n    assert len(xs) == 2\n    for x in xs:\n        assert x\n"
        "def test_c(d):\n    for k, v in sorted(d.items()):\n        assert v\n"  # 9: flagged
        "def test_d(d):\n    assert set(d) >= {'a'}\n    for k, v in d.items():\n        assert v\n"
        "def test_e():\n    for x in CONSTANT:\n        assert x\n"  # a module's constant
        "def test_f(xs):\n    for x in xs:\n        print(x)\n"  # asserts nothing
        "def test_g(d):\n    assert d['a'] == 1\n    for k in d:\n        assert k\n"
        "@given(xs=st.lists(st.integers()))\ndef test_h(xs):\n    for x in xs:\n        assert x\n"
        "def test_i(xss):\n    assert xss\n    for xs in xss:\n        for x in xs:\n            assert x\n"
    )
    assert _vacuous_loops(ast.parse(source)) == [(2, "xs"), (9, "d")]


@pytest.mark.parametrize(
    ("check", "form"),
    [(_vacuous_alls, "assert all(... in {})"), (_vacuous_loops, "for ... in {}: assert ...")],
    ids=["all", "loop"],
)
def test_no_assertion_passes_on_a_list_never_shown_non_empty(
    check: Callable[[ast.Module], list[tuple[int, str]]], form: str
) -> None:
    # `assert all(...)` and a loop of assertions pass on an empty list: show the list non-empty
    # too (its length, its contents, `xs[0]`, or `assert xs and all(...)`).
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {form.format(name)} with {name} never shown non-empty"
        for path, tree in _test_sources()
        for line, name in check(tree)
    ]
    assert offenders == [], "\n".join(offenders)


def test_the_run_lists_the_slowest_tests_of_each_level() -> None:
    seconds = {
        "tests/unit/test_a.py::test_1": 0.5,
        "tests/unit/test_a.py::test_2": 2.0,
        "tests/unit/sub/test_b.py::test_3[x]": 1.0,
        "tests/integration/test_c.py::test_4": 9.0,
        "tests/test_top.py::test_5": 0.1,
    }
    assert level("tests/unit/sub/test_b.py::test_3[x]") == "tests/unit"
    assert level("test_root.py::test") == "."
    times = slowest_by_level(seconds, count=2)
    assert [(t.level, t.tests, t.total) for t in times] == [
        ("tests", 1, 0.1),
        ("tests/integration", 1, 9.0),
        ("tests/unit", 3, 3.5),
    ]
    assert times[2].slowest == [
        (2.0, "tests/unit/test_a.py::test_2"),
        (1.0, "tests/unit/sub/test_b.py::test_3[x]"),
    ]
    with pytest.raises(ValueError, match="at least 1"):
        slowest_by_level(seconds, count=0)
