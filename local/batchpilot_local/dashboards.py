"""The template's CloudWatch dashboards and alarms, read for tests and for the replay's HTML report.

- :func:`dashboard_bodies`: each ``AWS::CloudWatch::Dashboard``'s ``DashboardBody`` as JSON data,
  its ``Fn::Sub`` resolved (parameters at their defaults, ``AWS::Region`` as the embedded AWS's).
- :func:`metric_references`: every metric a dashboard widget or an alarm of the template refers to,
  as ``(metric name, dimension names)``: from ``SEARCH('{Namespace,Dim,...} MetricName="X"', ...)``
  expressions, plain ``[namespace, name, dim, value, ...]`` widget metrics, Metrics Insights
  queries (``SELECT FUNC(X) FROM SCHEMA(Namespace, Dim, ...)``) and alarms' ``MetricName`` +
  ``Dimensions`` or ``Metrics`` lists.
- :func:`widget_series`: the replayed metrics a widget selects, as time series (for drawing).

A SEARCH schema matches metrics with exactly its dimension names, so every reference names the
full set, including Powertools' ``service`` dimension that every batchpilot metric carries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from batchpilot_local.report import MetricRecord
from batchpilot_local.template import ACCOUNT_ID, REGION, STACK_NAME

__all__ = ["MetricRef", "dashboard_bodies", "emitted", "is_emitted", "metric_references", "widget_series"]


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
    from cfnlint.decode.cfn_yaml import loads

    data = json.loads(json.dumps(loads(path.read_text(encoding="utf-8"), str(path))))
    return data if isinstance(data, dict) else {}


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


def dashboard_bodies(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(logical id, DashboardBody as data)`` of each dashboard of the template at ``path``.

    Raises:
        ValueError: a body is not a string/``!Sub`` or not JSON once substituted.
    """
    data = _raw(path)
    values = _defaults(data)
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


def _parse_time(text: str | None) -> datetime | None:
    if text is None:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def widget_series(
    properties: Mapping[str, Any], metrics: Sequence[MetricRecord], namespace: str
) -> dict[str, list[tuple[datetime, float]]]:
    """The replayed ``metrics`` a metric widget selects, as ``label -> [(time, value)]`` (values of
    one minute added up), one series per dimension set."""
    wanted: list[MetricRef] = []
    for entry in properties.get("metrics") or []:
        wanted.extend(_widget_metric_refs(entry))
    series: dict[str, dict[datetime, float]] = {}
    for metric in metrics:
        if not any(ref.matches(metric.name, frozenset(metric.dimensions)) for ref in wanted):
            continue
        moment = _parse_time(metric.timestamp)
        if moment is None:
            continue
        label = (
            metric.name
            + " "
            + " ".join(f"{k}={v}" for k, v in sorted(metric.dimensions.items()) if k != "service")
        )
        values = metric.value if isinstance(metric.value, list) else [metric.value]
        points = series.setdefault(label.strip(), {})
        points[moment] = points.get(moment, 0.0) + sum(values)
    return {label: sorted(points.items()) for label, points in sorted(series.items())}
