"""The template's CloudWatch dashboards and alarms, read for tests and for the replay's HTML report.

- :func:`dashboard_bodies`: each ``AWS::CloudWatch::Dashboard``'s ``DashboardBody`` as JSON data,
  its ``Fn::Sub`` resolved (parameters at their defaults, ``AWS::Region`` as the embedded AWS's).
- :func:`metric_references`: every metric a dashboard widget or an alarm of the template refers to,
  as ``(metric name, dimension names)``: from ``SEARCH('{Namespace,Dim,...} MetricName="X"', ...)``
  expressions, plain ``[namespace, name, dim, value, ...]`` widget metrics, Metrics Insights
  queries (``SELECT FUNC(X) FROM SCHEMA(Namespace, Dim, ...)``) and alarms' ``MetricName`` +
  ``Dimensions`` or ``Metrics`` lists.
- :func:`widget_lines` (and :func:`widget_series`): the lines a metric widget draws, computed from
  the replayed metrics as CloudWatch computes them: each line's statistic (:func:`statistic`) over
  its period, SEARCH and plain metrics, and the metric math the template's widgets use.

A SEARCH schema matches metrics with exactly its dimension names, so every reference names the
full set, including Powertools' ``service`` dimension that every batchpilot metric carries.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from batchpilot_local.report import MetricRecord
from batchpilot_local.template import ACCOUNT_ID, REGION, STACK_NAME, parse_file

__all__ = [
    "DEFAULT_PERIOD",
    "DEFAULT_STAT",
    "Line",
    "MetricIndex",
    "MetricRef",
    "UnsupportedWidget",
    "dashboard_bodies",
    "emitted",
    "is_emitted",
    "metric_references",
    "period_start",
    "statistic",
    "widget_lines",
    "widget_series",
]


@dataclass(frozen=True)
class MetricRef:
    """A metric a widget or alarm refers to.

    Attributes:
        name: the metric name.
        dimensions: the names of its dimensions. With ``exact`` (a SEARCH schema, ``SCHEMA(...)``
            or a plain metric), the metric must have exactly these; otherwise (a Metrics Insights
            ``FROM "namespace"`` query) at least these (its ``WHERE`` and ``GROUP BY`` keys).
        exact: see ``dimensions``.
    """

    name: str
    dimensions: frozenset[str]
    exact: bool = True

    def matches(self, name: str, dimensions: frozenset[str]) -> bool:
        """True when a metric of ``name`` with these dimension names is what this refers to."""
        if name != self.name:
            return False
        return dimensions == self.dimensions if self.exact else self.dimensions <= dimensions

    def __str__(self) -> str:
        dims = ",".join(sorted(self.dimensions))
        return f"{self.name}{{{dims}}}" if self.exact else f"{self.name}{{{dims},...}}"


_SEARCH = re.compile(r"SEARCH\(\s*'\{(?P<schema>[^}]*)\}(?P<terms>[^']*)'", re.IGNORECASE)
_METRIC_NAME = re.compile(r"MetricName\s*=\s*\"?(?P<name>[A-Za-z0-9_.-]+)\"?")
_INSIGHTS = re.compile(
    r"SELECT\s+\w+\((?P<name>[A-Za-z0-9_.-]+)\)\s+FROM\s+"
    r"(?:SCHEMA\((?P<schema>[^)]*)\)|\"(?P<namespace>[^\"]+)\")"
    r"(?:\s+WHERE\s+(?P<where>.*?))?(?:\s+GROUP\s+BY\s+(?P<group>[\w\s,]+?))?"
    r"(?:\s+ORDER\s+BY.*)?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_WHERE_KEY = re.compile(r"(\w+)\s*(?:=|!=|IN\b|LIKE\b)", re.IGNORECASE)
_ALARM = "AWS::CloudWatch::Alarm"
_DASHBOARD = "AWS::CloudWatch::Dashboard"


def _raw(path: Path) -> dict[str, Any]:
    """The template as plain data, read as the replay reads it (:func:`template.parse_file`)."""
    return parse_file(path)


def _defaults(data: Mapping[str, Any]) -> dict[str, str]:
    values = {
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT_ID,
        "AWS::StackName": STACK_NAME,
        "AWS::Partition": "aws",
        "AWS::URLSuffix": "amazonaws.com",
    }
    for name, spec in (data.get("Parameters") or {}).items():
        if isinstance(spec, Mapping) and "Default" in spec:
            values[name] = str(spec["Default"])
    return values


def _sub(node: Any, values: Mapping[str, str]) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, Mapping) and "Fn::Sub" in node:
        arg = node["Fn::Sub"]
        text, extra = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        merged = {**values, **{k: str(v) for k, v in extra.items()}}
        return re.sub(r"\$\{([^}!]+)\}", lambda m: merged.get(m.group(1), m.group(0)), text)
    raise ValueError("DashboardBody must be a string or !Sub")


def dashboard_bodies(
    path: Path, overrides: Mapping[str, str] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """``(logical id, DashboardBody as data)`` of each dashboard of the template at ``path``, its
    ``${Parameter}`` references at the parameters' ``Default`` or, for a parameter in
    ``overrides`` (name → text, as ``--parameter-overrides`` gives them), that value: an alarm
    threshold drawn as an annotation is the one the deployed alarm would use.

    Raises:
        ValueError: a body is not a string/``!Sub`` or not JSON once substituted.
    """
    data = _raw(path)
    values = _defaults(data) | dict(overrides or {})
    out = []
    for logical_id, resource in (data.get("Resources") or {}).items():
        if isinstance(resource, Mapping) and resource.get("Type") == _DASHBOARD:
            body = _sub((resource.get("Properties") or {}).get("DashboardBody"), values)
            out.append((logical_id, json.loads(body)))
    return out


def _schema(text: str) -> tuple[str, frozenset[str]]:
    parts = [p.strip().strip('"') for p in text.split(",") if p.strip()]
    return (parts[0] if parts else ""), frozenset(parts[1:])


def _expression_refs(expression: str) -> list[MetricRef]:
    """The metrics a SEARCH or Metrics Insights expression refers to (AWS/* namespaces left out)."""
    refs: list[MetricRef] = []
    for match in _SEARCH.finditer(expression):
        namespace, dims = _schema(match.group("schema"))
        name = _METRIC_NAME.search(match.group("terms"))
        if name and not namespace.startswith("AWS/"):
            refs.append(MetricRef(name.group("name"), dims))
    query = _INSIGHTS.search(" ".join(expression.split()))
    if query is not None:
        if query.group("schema") is not None:
            namespace, dims = _schema(query.group("schema"))
            exact = True
        else:
            namespace = query.group("namespace")
            keys = _WHERE_KEY.findall(query.group("where") or "")
            keys += [k.strip() for k in (query.group("group") or "").split(",") if k.strip()]
            dims, exact = frozenset(keys), False
        if not namespace.startswith("AWS/"):
            refs.append(MetricRef(query.group("name"), dims, exact))
    return refs


def _widget_metric_refs(entry: Sequence[Any]) -> list[MetricRef]:
    """One entry of a widget's ``metrics``: ``[{"expression": ...}]``, or ``[namespace, name, key,
    value, ..., {options}]`` (``"..."`` repeats the previous entry's values: not used here)."""
    if entry and isinstance(entry[0], Mapping):
        return _expression_refs(str(entry[0].get("expression", "")))
    plain = [e for e in entry if isinstance(e, str)]
    if len(plain) >= 2 and plain[0] != "..." and not plain[0].startswith("AWS/"):
        return [MetricRef(plain[1], frozenset(plain[2::2]))]
    return []


def metric_references(path: Path) -> list[tuple[str, MetricRef]]:
    """Every ``(resource logical id, reference)`` of the template's dashboards and alarms to a
    metric of batchpilot's namespace (metrics of ``AWS/*`` namespaces are left out: AWS publishes
    those)."""
    data = _raw(path)
    out: list[tuple[str, MetricRef]] = []
    for logical_id, body in dashboard_bodies(path):
        for widget in body.get("widgets") or []:
            for entry in (widget.get("properties") or {}).get("metrics") or []:
                out.extend((logical_id, ref) for ref in _widget_metric_refs(entry))
    values = _defaults(data)
    for logical_id, resource in (data.get("Resources") or {}).items():
        if not isinstance(resource, Mapping) or resource.get("Type") != _ALARM:
            continue
        props = resource.get("Properties") or {}
        namespace = props.get("Namespace")
        if isinstance(namespace, str) and namespace.startswith("AWS/"):
            continue
        if isinstance(props.get("MetricName"), str):
            keys = frozenset(str(d.get("Name")) for d in props.get("Dimensions") or [])
            out.append((logical_id, MetricRef(props["MetricName"], keys)))
        for query in props.get("Metrics") or []:
            stat = query.get("MetricStat")
            if isinstance(stat, Mapping):
                metric = stat.get("Metric") or {}
                if isinstance(metric.get("Namespace"), str) and metric["Namespace"].startswith("AWS/"):
                    continue
                keys = frozenset(str(d.get("Name")) for d in metric.get("Dimensions") or [])
                out.append((logical_id, MetricRef(str(metric.get("MetricName")), keys)))
            if "Expression" in query:
                expression = _sub(query["Expression"], values)
                out.extend((logical_id, ref) for ref in _expression_refs(expression))
    return out


def emitted(metrics: Iterable[MetricRecord]) -> set[tuple[str, frozenset[str]]]:
    """The ``(name, dimension names)`` of replayed metrics."""
    return {(m.name, frozenset(m.dimensions)) for m in metrics}


def is_emitted(reference: MetricRef, metrics: set[tuple[str, frozenset[str]]]) -> bool:
    """True when one of the ``(name, dimension names)`` pairs is what ``reference`` refers to."""
    return any(reference.matches(name, dims) for name, dims in metrics)


# ------------------------------------------------------------------- a widget drawn locally
DEFAULT_STAT = "Average"
"""A metric widget's ``stat`` when neither the widget nor the metric names one (CloudWatch's
dashboard body structure)."""
DEFAULT_PERIOD = 300
"""A metric widget's ``period`` in seconds when neither the widget nor the metric gives one."""

_BASIC_STATISTICS = ("SampleCount", "Sum", "Average", "Minimum", "Maximum")
_PERCENTILE = re.compile(r"p(?P<q>\d{1,3}(?:\.\d+)?)", re.IGNORECASE)
_TERM = re.compile(r"(?P<key>[A-Za-z0-9_.:-]+)\s*=\s*(?:\"(?P<quoted>[^\"]*)\"|(?P<bare>[^\s\"()]+))")


class UnsupportedWidget(ValueError):
    """A widget's metric entry that :func:`widget_lines` cannot compute from the replayed metrics (a
    statistic, metric math function or query form it does not implement); the message names it."""


def statistic(values: Sequence[float], stat: str) -> float:
    """CloudWatch's statistic ``stat`` of one period's samples (each EMF value, and each member of
    an EMF value array, is one sample).

    ``SampleCount`` (how many samples), ``Sum``, ``Average`` (Sum / SampleCount), ``Minimum``,
    ``Maximum`` (CloudWatch User Guide, "CloudWatch statistics definitions") and percentiles
    ``pNN`` / ``pNN.NN``: the nearest rank, the smallest sample with at least NN % of the samples
    at or below it (numpy's ``inverted_cdf``). CloudWatch defines a percentile as the value NN % of
    the period's data is below and publishes no interpolation, so the drawn value is always one of
    the samples.

    Raises:
        ValueError: ``values`` is empty.
        UnsupportedWidget: any other statistic (trimmed means, ``PR(...)``, ``TC(...)``, ...).
    """
    if not values:
        raise ValueError("a statistic of no samples")
    if stat == "SampleCount":
        return float(len(values))
    if stat == "Sum":
        return math.fsum(values)
    if stat == "Average":
        return statistics.fmean(values)
    if stat == "Minimum":
        return float(min(values))
    if stat == "Maximum":
        return float(max(values))
    _check_statistic(stat)
    match = _PERCENTILE.fullmatch(stat)
    assert match is not None  # the basic statistics returned above
    import numpy

    return float(numpy.percentile(values, float(match.group("q")), method="inverted_cdf"))


def period_start(moment: datetime, period: int) -> datetime:
    """The start (aware UTC) of the ``period``-second period that holds ``moment``: periods are
    aligned to whole multiples of ``period`` since the epoch, as a dashboard's datapoints are."""
    seconds = math.floor(moment.timestamp())
    return datetime.fromtimestamp(seconds - seconds % period, tz=UTC)


@dataclass(frozen=True)
class Line:
    """One line a metric widget draws.

    Attributes:
        label: the legend text: ``"MetricName Dim=value ..."`` for a metric (without Powertools'
            ``service``; ``"MetricName Statistic Dim=value ..."`` when the widget's metrics use
            more than one statistic, and the period too, ``"Statistic/300s"``, when they use more
            than one period), the entry's ``label`` (else its ``id``) for metric math.
        points: ``[(period start, aware UTC; value)]`` in time order.
        stat: the statistic of a metric's line; None for metric math.
        period: the period of its values, in seconds.
        y_axis: ``"left"`` or ``"right"`` (the entry's ``yAxis`` option).
    """

    label: str
    points: list[tuple[datetime, float]]
    stat: str | None
    period: int
    y_axis: str = "left"


@dataclass
class _Series:
    """A time series while a widget is evaluated: period start → value."""

    points: dict[datetime, float]
    period: int
    label: str = ""
    stat: str | None = None


_Value = float | _Series | list[_Series]  # a scalar, a time series, or an array of time series


class MetricIndex:
    """Replayed metrics by name, built once and shared by every widget of a report.

    Args:
        metrics: the replayed metrics (:class:`~batchpilot_local.report.MetricRecord`); those
            without a timestamp are left out (CloudWatch files a datapoint under its timestamp).
    """

    def __init__(self, metrics: Iterable[MetricRecord]) -> None:
        self.by_name: dict[str, list[tuple[datetime, MetricRecord]]] = {}
        for metric in metrics:
            if metric.timestamp is not None:
                moment = datetime.fromisoformat(metric.timestamp.replace("Z", "+00:00"))
                self.by_name.setdefault(metric.name, []).append((moment, metric))


def _samples(metric: MetricRecord) -> list[float]:
    return [float(v) for v in metric.value] if isinstance(metric.value, list) else [float(metric.value)]


class _Widget:
    """One metric widget's entries evaluated against the replayed metrics (see :func:`widget_lines`)."""

    def __init__(self, properties: Mapping[str, Any], index: MetricIndex, namespace: str) -> None:
        self.index = index
        self.namespace = namespace
        self.stat = str(properties.get("stat") or DEFAULT_STAT)
        self.period = int(properties.get("period") or DEFAULT_PERIOD)
        self.entries: list[Sequence[Any]] = [e for e in properties.get("metrics") or [] if e]
        self.by_id: dict[str, Sequence[Any]] = {}
        for entry in self.entries:
            entry_id = self.options(entry).get("id")
            if isinstance(entry_id, str):
                self.by_id[entry_id] = entry
        self.values: dict[str, _Value] = {}
        self.evaluating: set[str] = set()
        self.queries: dict[tuple[Any, ...], list[_Series]] = {}
        self.sample_times: set[datetime] = set()
        self.kinds: set[tuple[str, int]] = set()

    @staticmethod
    def options(entry: Sequence[Any]) -> Mapping[str, Any]:
        """The entry's rendering options: the expression object, or a plain metric's last item."""
        if isinstance(entry[0], Mapping):
            return entry[0]
        return entry[-1] if isinstance(entry[-1], Mapping) else {}

    def kind(self, entry: Sequence[Any]) -> str:
        """``"plain"`` (a metric), ``"search"`` (an expression that is one SEARCH) or ``"math"``."""
        if not isinstance(entry[0], Mapping):
            return "plain"
        return "search" if _is_call(self.parse(str(entry[0].get("expression", ""))), "SEARCH") else "math"

    # ------------------------------------------------------------------ metric queries
    def searches(self) -> list[tuple[str, str, int]]:
        """``(query, stat, period)`` of every SEARCH in the widget's expressions."""
        found = []
        for entry in self.entries:
            if isinstance(entry[0], Mapping) and "expression" in entry[0]:
                for node in ast.walk(self.parse(str(entry[0]["expression"]))):
                    if isinstance(node, ast.Call) and _is_call(node, "SEARCH"):
                        found.append(self.search_arguments(node))
        return found

    def prepare(self) -> None:
        """Run every metric query once, so the widget's statistics and periods (for labels) and its
        sample times (for FILL) are known before any line is made."""
        searches = self.searches()
        plains = [e for e in self.entries if not isinstance(e[0], Mapping)]
        for stat, period in [(s, p) for _, s, p in searches] + [self.plain_stat(e) for e in plains]:
            _check_statistic(stat)
            self.kinds.add((stat, period))
        for query, stat, period in searches:
            self.search(query, stat, period)
        for entry in plains:
            self.plain(entry)

    def plain_stat(self, entry: Sequence[Any]) -> tuple[str, int]:
        options = self.options(entry)
        return str(options.get("stat") or self.stat), int(options.get("period") or self.period)

    def select(
        self, name: str, dimensions: frozenset[str], filters: Mapping[str, str], stat: str, period: int
    ) -> list[_Series]:
        """Each metric of ``name`` with exactly these dimension names (and these values), its
        samples grouped by period into ``stat``: one series per dimension set."""
        key = (name, dimensions, tuple(sorted(filters.items())), stat, period)
        if key in self.queries:
            return self.queries[key]
        grouped: dict[tuple[tuple[str, str], ...], dict[datetime, list[float]]] = {}
        for moment, metric in self.index.by_name.get(name, []):
            if frozenset(metric.dimensions) != dimensions:
                continue
            if any(metric.dimensions.get(k) != v for k, v in filters.items()):
                continue
            self.sample_times.add(moment)
            identity = tuple(sorted(metric.dimensions.items()))
            grouped.setdefault(identity, {}).setdefault(period_start(moment, period), []).extend(
                _samples(metric)
            )
        out = [
            _Series(
                {start: statistic(values, stat) for start, values in sorted(periods.items())},
                period,
                self.metric_label(name, dict(identity), stat, period),
                stat,
            )
            for identity, periods in grouped.items()
        ]
        # A query that matched nothing is one empty series: metric math over it (SUM, FILL) keeps
        # its period, and it draws no line.
        self.queries[key] = sorted(out, key=lambda s: s.label) or [_Series({}, period, "", stat)]
        return self.queries[key]

    def metric_label(self, name: str, dimensions: Mapping[str, str], stat: str, period: int) -> str:
        parts = [name]
        if len({s for s, _ in self.kinds}) > 1 or len({p for _, p in self.kinds}) > 1:
            parts.append(stat if len({p for _, p in self.kinds}) == 1 else f"{stat}/{period}s")
        parts += [f"{k}={v}" for k, v in sorted(dimensions.items()) if k != "service"]
        return " ".join(parts)

    def search(self, query: str, stat: str, period: int) -> list[_Series]:
        """``SEARCH('{Namespace,Dim,...} MetricName="X" Dim="value"', stat, period)``: the metrics
        with exactly the schema's dimension names. Terms are read as exact ``key=value`` matches (a
        SEARCH term also matches a part of a value; batchpilot's dashboards name whole values)."""
        match = re.fullmatch(r"\s*\{(?P<schema>[^}]*)\}(?P<terms>.*)", query, re.DOTALL)
        if match is None:
            raise UnsupportedWidget(f"SEARCH without a {{namespace,dimensions}} schema: {query!r}")
        namespace, dimensions = _schema(match.group("schema"))
        terms = {
            m.group("key"): m.group("quoted") or m.group("bare") or ""
            for m in _TERM.finditer(match.group("terms"))
        }
        if _TERM.sub("", match.group("terms")).strip():
            raise UnsupportedWidget(f"SEARCH terms other than key=value: {query!r}")
        name = terms.pop("MetricName", None)
        if namespace != self.namespace or name is None:
            return []
        return self.select(name, dimensions, terms, stat, period)

    def plain(self, entry: Sequence[Any]) -> _Series:
        """``[namespace, name, key, value, ..., {options}]``: that one metric."""
        texts = [e for e in entry if isinstance(e, str)]
        if "..." in texts or len(texts) < 2 or len(texts) % 2:
            raise UnsupportedWidget(f"metric entry {list(entry)!r}")
        stat, period = self.plain_stat(entry)
        pairs = dict(zip(texts[2::2], texts[3::2], strict=True))
        series = _Series({}, period, self.metric_label(texts[1], pairs, stat, period), stat)
        if texts[0] == self.namespace:
            found = self.select(texts[1], frozenset(pairs), pairs, stat, period)
            series = found[0] if found else series
        return series

    # ------------------------------------------------------------------------- metric math
    @staticmethod
    def parse(expression: str) -> ast.expr:
        try:
            return ast.parse(expression.strip(), mode="eval").body
        except SyntaxError as error:
            raise UnsupportedWidget(f"expression {expression!r} is not evaluated locally") from error

    @staticmethod
    def search_arguments(node: ast.Call) -> tuple[str, str, int]:
        args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
        if (
            len(args) != 3
            or not isinstance(args[0], str)
            or not isinstance(args[1], str)
            or not isinstance(args[2], int)
        ):
            raise UnsupportedWidget(f"SEARCH arguments {ast.unparse(node)!r}")
        return args[0], args[1], args[2]

    def value_of(self, entry_id: str) -> _Value:
        if entry_id in self.values:
            return self.values[entry_id]
        entry = self.by_id.get(entry_id)
        if entry is None or entry_id in self.evaluating:
            raise UnsupportedWidget(f"metric math id {entry_id!r} is not a metric of the widget")
        self.evaluating.add(entry_id)
        value: _Value
        if isinstance(entry[0], Mapping):
            value = self.evaluate(self.parse(str(entry[0].get("expression", ""))))
        else:
            value = self.plain(entry)
        self.values[entry_id] = value
        return value

    def fill_range(self, period: int) -> set[datetime]:
        """The periods in which the widget's metrics have samples: the replay's time range. (In
        CloudWatch, FILL fills every period of the dashboard's range; locally the stretches
        between replayed scenarios are not drawn.)"""
        return {period_start(t, period) for t in self.sample_times}

    def evaluate(self, node: ast.expr) -> _Value:
        """A metric math expression (CloudWatch User Guide, "Metric math syntax and functions"):
        numbers, ids, ``+ - * /``, comparisons (1 or 0), SEARCH, SUM/AVG/MIN/MAX, FILL with a
        number, IF. A binary operation between two time series keeps the periods both have."""
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return float(node.value)
        if isinstance(node, ast.Name):
            return self.value_of(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return _combine(-1.0, self.evaluate(node.operand), operator.mul)
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
            function = _ARITHMETIC[type(node.op)]
            return _combine(self.evaluate(node.left), self.evaluate(node.right), function)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARISONS:
            test = _COMPARISONS[type(node.ops[0])]
            return _combine(
                self.evaluate(node.left),
                self.evaluate(node.comparators[0]),
                lambda a, b: 1.0 if test(a, b) else 0.0,
            )
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
            return self.call(node.func.id, node)
        raise UnsupportedWidget(f"metric math {ast.unparse(node)!r} is not evaluated locally")

    def call(self, function: str, node: ast.Call) -> _Value:
        if function == "SEARCH":
            return self.search(*self.search_arguments(node))
        args = [self.evaluate(a) for a in node.args]
        if function in _AGGREGATES and len(args) == 1:
            return _aggregate(args[0], _AGGREGATES[function])
        if function == "FILL" and len(args) == 2 and isinstance(args[1], float):
            return _apply(args[0], lambda s: self.fill(s, float(args[1])))  # type: ignore[arg-type]
        if function == "IF" and len(args) in (2, 3) and isinstance(args[0], _Series):
            return _if(args[0], args[1], args[2] if len(args) == 3 else None)
        raise UnsupportedWidget(f"metric math {ast.unparse(node)!r} is not evaluated locally")

    def fill(self, series: _Series, value: float) -> _Series:
        points = {t: value for t in self.fill_range(series.period)} | series.points
        return _Series(dict(sorted(points.items())), series.period, series.label, series.stat)

    # ------------------------------------------------------------------------------ lines
    def lines(self) -> list[Line]:
        self.prepare()
        out: list[Line] = []
        taken: set[str] = set()
        for number, entry in enumerate(self.entries):
            options = self.options(entry)
            if options.get("visible") is False:
                continue
            entry_id = str(options.get("id") or f"entry{number + 1}")
            if options.get("id") is None:
                self.by_id[entry_id] = entry
            value = self.value_of(entry_id)
            label = options.get("label")
            members: list[_Series]
            if isinstance(value, float):
                periods = self.fill_range(self.period)
                members = [_Series(dict.fromkeys(sorted(periods), value), self.period)]
            elif isinstance(value, _Series):
                members = [value]
            else:
                members = value
            kind = self.kind(entry)
            for member in members:
                if not member.points:
                    continue
                if kind == "math" and not isinstance(value, list):
                    text = str(label or entry_id)
                elif kind == "plain" and label:
                    text = str(label)
                else:
                    text = member.label
                unique, n = text, 1
                while unique in taken:
                    n += 1
                    unique = f"{text} ({n})"
                taken.add(unique)
                out.append(
                    Line(
                        unique,
                        sorted(member.points.items()),
                        None if kind == "math" else member.stat,
                        member.period,
                        "right" if options.get("yAxis") == "right" else "left",
                    )
                )
        return out


def _check_statistic(stat: str) -> None:
    """Raise :class:`UnsupportedWidget` for a statistic :func:`statistic` does not compute."""
    match = _PERCENTILE.fullmatch(stat)
    if stat not in _BASIC_STATISTICS and (match is None or float(match.group("q")) > 100):
        raise UnsupportedWidget(f"statistic {stat!r} is not computed locally")


def _is_call(node: ast.AST, function: str) -> bool:
    """True when ``node`` is a call of ``function`` (a metric math function name)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == function


def _divide(a: float, b: float) -> float:
    return a / b if b else math.nan


_ARITHMETIC: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _divide,
}
_COMPARISONS: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}
_AGGREGATES: dict[str, Callable[[Sequence[float]], float]] = {
    "SUM": math.fsum,
    "AVG": statistics.fmean,
    "MIN": min,
    "MAX": max,
}


def _apply(value: _Value, function: Callable[[_Series], _Series]) -> _Value:
    """``function`` on a time series, on each of an array's, a scalar unchanged."""
    if isinstance(value, list):
        return [function(s) for s in value]
    return function(value) if isinstance(value, _Series) else value


def _combine(a: _Value, b: _Value, function: Callable[[float, float], float]) -> _Value:
    """``function`` of two operands: scalars; a series and a scalar (each value); two series (the
    periods both have); an array and a scalar or series (each member). A division by zero leaves
    the period out."""
    if isinstance(a, list) and isinstance(b, list):
        raise UnsupportedWidget("metric math between two arrays of time series is not evaluated locally")
    if isinstance(a, list):
        return [_combine(s, b, function) for s in a]  # type: ignore[misc]
    if isinstance(b, list):
        return [_combine(a, s, function) for s in b]  # type: ignore[misc]
    if isinstance(a, float) and isinstance(b, float):
        return function(a, b)
    left = a if isinstance(a, _Series) else None
    right = b if isinstance(b, _Series) else None
    template = left or right
    assert template is not None  # a scalar with a scalar returned above
    times = (left.points.keys() & right.points.keys()) if left and right else template.points.keys()
    points = {}
    for t in sorted(times):
        value = function(
            left.points[t] if left else float(a),  # type: ignore[arg-type]
            right.points[t] if right else float(b),  # type: ignore[arg-type]
        )
        if not math.isnan(value):
            points[t] = value
    return _Series(points, template.period, template.label, None)


def _aggregate(value: _Value, function: Callable[[Sequence[float]], float]) -> _Value:
    """SUM/AVG/MIN/MAX: of an array, the time series of each period's members' values (the members
    that have that period); of one time series, the scalar of its values."""
    if isinstance(value, float):
        return value
    if isinstance(value, _Series):
        return function(list(value.points.values())) if value.points else math.nan
    by_time: dict[datetime, list[float]] = {}
    for series in value:
        for t, v in series.points.items():
            by_time.setdefault(t, []).append(v)
    period = value[0].period if value else DEFAULT_PERIOD
    return _Series({t: function(vs) for t, vs in sorted(by_time.items())}, period)


def _if(condition: _Series, yes: _Value, no: _Value | None) -> _Series:
    """IF(condition, true value, false value): per period of the condition; a period whose branch
    has no value (or no false value given) is left out."""
    points = {}
    for t, c in condition.points.items():
        branch = yes if c != 0 else no
        if isinstance(branch, float):
            points[t] = branch
        elif isinstance(branch, _Series) and t in branch.points:
            points[t] = branch.points[t]
        elif isinstance(branch, list):
            raise UnsupportedWidget("IF over an array of time series is not evaluated locally")
    return _Series(points, condition.period)


def widget_lines(
    properties: Mapping[str, Any], metrics: Sequence[MetricRecord] | MetricIndex, namespace: str
) -> list[Line]:
    """The lines a metric widget (its ``properties``) draws from the replayed ``metrics`` of
    ``namespace``, computed as CloudWatch computes a dashboard's: each metric's samples grouped
    into periods (the SEARCH's own period, else the metric's ``period`` option, else the widget's;
    aligned to multiples of the period) and reduced with the SEARCH's statistic, else the metric's
    ``stat`` option, else the widget's (:func:`statistic`); one line per metric (dimension set) a
    SEARCH or plain metric selects; metric math evaluated over those (:class:`_Widget`); entries with
    ``"visible": false`` feed the math but draw no line; lines without a value left out. Metrics
    of another namespace (``AWS/*``) have no data locally.

    Returns:
        The lines in entry order (a SEARCH's lines by label).

    Raises:
        UnsupportedWidget: an entry uses a statistic, function or query form not computed locally.
    """
    index = metrics if isinstance(metrics, MetricIndex) else MetricIndex(metrics)
    return _Widget(properties, index, namespace).lines()


def widget_series(
    properties: Mapping[str, Any], metrics: Sequence[MetricRecord] | MetricIndex, namespace: str
) -> dict[str, list[tuple[datetime, float]]]:
    """:func:`widget_lines` as ``label -> [(period start, value)]``.

    Raises:
        UnsupportedWidget: as :func:`widget_lines`.
    """
    return {line.label: line.points for line in widget_lines(properties, metrics, namespace)}
