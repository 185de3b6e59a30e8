"""Fixes of plain inefficiencies in moto, for the moto versions they were written for: the one
module of batchpilot that changes a library's internals, offered upstream meanwhile.

Each fix makes moto do the same work once instead of again and again, and changes no answer; each
is written up as a moto pull request (a patch against moto and its description) in
``local/batchpilot_local/emulator/upstream/`` (listed in its README), and goes from here once a
moto release has it.

- :func:`transaction_copies_items` (``upstream/01-transact-write-items-rollback.md``):
  TransactWriteItems keeps a copy of the items it touches for its rollback, not of every table it
  names (moto deep-copies the tables: time and memory quadratic in a replay's events);
- :func:`validators_find_processors_once` (``upstream/02-expression-validator-dispatch.md``):
  the UpdateExpression validators find a node's processor by its class once, not by rebuilding a
  dict of bound methods and asking ABC ``isinstance`` questions for every node;
- :func:`update_expressions_parsed_once` (``upstream/03-update-expression-parse-cache.md``): one
  parse per UpdateExpression text (moto parses it on every UpdateItem, twice per update of a
  transaction);
- :func:`input_paths_parsed_once` (``upstream/04-eventbridge-input-path-cache.md``): EventBridge
  parses each of a target's input paths once (moto builds a jsonpath parser, yacc tables
  included, for each path of each event it sends to each target);
- :func:`retention_read_directly` (``upstream/05-sqs-retention-check.md``): SQS's per-message
  retention check reads the queue's retention period, not its whole attribute dict, three times
  built.

moto's model registry (``BaseModel.instances_tracked``, which keeps every object moto ever made
for its server's dashboard) needs no fix here: the embedded AWS empties it through moto's own
``moto.core.model_instances.reset_model_data`` (``upstream/06-model-instance-tracking.md``).

:func:`install` applies them when the installed moto is one of :data:`WRITTEN_FOR` and says in one
line what to do when it is not; the embedded AWS and the replay work the same without them, only
slower. ``BATCHPILOT_MOTO_FIXES=0`` leaves them out (to measure what they buy).
``tests/integration/test_moto_fixes.py`` checks that the answers stay moto's.
"""

from __future__ import annotations

import functools
import os
import sys
from importlib import metadata
from typing import Any

__all__ = [
    "DISABLE_ENV",
    "UPSTREAM",
    "WRITTEN_FOR",
    "input_paths_parsed_once",
    "install",
    "installed",
    "moto_version",
    "retention_read_directly",
    "transaction_copies_items",
    "uninstall",
    "update_expressions_parsed_once",
    "validators_find_processors_once",
]

WRITTEN_FOR = ("5.2.1", "5.2.2", "5.2.3", "5.2.4", "5.2.5")
"""The moto releases these fixes were written for: the code each one replaces is the same in all
of them (compared release by release)."""

DISABLE_ENV = "BATCHPILOT_MOTO_FIXES"
"""Set to ``0`` to leave the fixes out."""

UPSTREAM = "local/batchpilot_local/emulator/upstream/"
"""Where each fix's pull request for moto is written up."""

_PARSES_KEPT = 512
_state: dict[str, Any] = {"installed": None, "told": False}
_replaced: list[tuple[Any, str, Any]] = []  # (owner, attribute, what it was), in the order replaced
_MISSING = object()


def _replace(owner: Any, name: str, value: Any) -> None:
    """Set ``owner.name`` to ``value``, remembering what it was for :func:`uninstall`."""
    _replaced.append((owner, name, owner.__dict__.get(name, _MISSING)))
    setattr(owner, name, value)


def moto_version() -> str:
    """The installed moto's version (its distribution metadata)."""
    return metadata.version("moto")


def installed() -> bool:
    """Whether :func:`install` applied the fixes in this process."""
    return bool(_state["installed"])


def uninstall() -> None:
    """Put back everything :func:`install` replaced (for the tests that compare moto's answers
    with and without the fixes); :func:`install` applies them again. Idempotent."""
    while _replaced:
        owner, name, value = _replaced.pop()
        if value is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, value)
    _state["installed"] = None


def install() -> bool:
    """Apply every fix, once per process, if the installed moto is one of :data:`WRITTEN_FOR` and
    :data:`DISABLE_ENV` is not ``0``; returns whether they are in. For any other moto, one line on
    standard error (once per process) says so and what to do; nothing is changed.
    """
    if _state["installed"] is not None:
        return bool(_state["installed"])
    version = moto_version()
    if os.environ.get(DISABLE_ENV) == "0":
        _state["installed"] = False
        return False
    if version not in WRITTEN_FOR:
        if not _state["told"]:
            sys.stderr.write(
                f"batchpilot: moto {version} is not one the embedded AWS's moto fixes were written for "
                f"({WRITTEN_FOR[0]} to {WRITTEN_FOR[-1]}): running without them, slower; install moto "
                f"{WRITTEN_FOR[-1]}, or check each fix against moto {version} and add it to WRITTEN_FOR "
                "in local/batchpilot_local/emulator/moto_fixes.py\n"
            )
            _state["told"] = True
        _state["installed"] = False
        return False
    transaction_copies_items()
    validators_find_processors_once()
    update_expressions_parsed_once()
    input_paths_parsed_once()
    retention_read_directly()
    _state["installed"] = True
    return True


def transaction_copies_items() -> None:
    """TransactWriteItems keeps, for its rollback, a copy of each item it names, not of each table.

    moto 5.2's ``DynamoDBBackend.transact_write_items`` deep-copies every table a transaction names
    (once per operation) so that it can roll back; with a ledger writing one transaction per job
    event into one table, each event copies the whole table: time quadratic in the events and a
    peak memory of several table copies. A transaction only changes the items it names, so
    keeping those items (or their absence) and putting them back is the same rollback
    (``tests/integration/test_moto_fixes.py``); a transaction on a table with a stream keeps
    moto's own (which also drops the cancelled writes' stream records). Upstream:
    ``upstream/01-transact-write-items-rollback.md``. Idempotent.
    """
    import copy

    from moto.dynamodb import models

    backend_class = models.DynamoDBBackend
    if "_batchpilot_items_rollback" in vars(backend_class):
        return
    original = backend_class.transact_write_items
    table_class = getattr(models, "Table")  # noqa: B009 - not in moto's __all__

    class _NoTableCopy:
        """``copy`` as moto's module sees it while a transaction runs: tables are not copied."""

        def __getattr__(self, name: str) -> Any:
            return getattr(copy, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            return value if isinstance(value, table_class) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        names = {next(iter(item.values())).get("TableName") for item in transact_items if item}
        if any(getattr(self.tables.get(name), "stream_shard", None) is not None for name in names):
            # A table with a stream: moto's own rollback also drops the cancelled writes' records.
            original(self, transact_items)
            return
        saved: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
        for item in transact_items:
            _, op = next(iter(item.items()))
            name = op.get("TableName")
            table = self.tables.get(name) if isinstance(name, str) else None
            if table is None:
                continue
            if "Key" in op:
                key = op["Key"]
            elif "Item" in op:
                key = {table.hash_key_attr: op["Item"].get(table.hash_key_attr)}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = op["Item"].get(table.range_key_attr)
            else:
                continue
            try:
                current = self.get_item(name, key)
            except Exception:  # noqa: S112 - moto refuses the key: the transaction raises it too
                continue
            snapshot = copy.deepcopy(current.to_json()["Attributes"]) if current else None
            saved.append((name, key, snapshot))
        module: Any = models
        module_copy = module.copy
        module.copy = _NoTableCopy()
        try:
            original(self, transact_items)
        except BaseException:
            for name, key, attributes in reversed(saved):
                if attributes is None:
                    if self.get_item(name, key) is not None:
                        self.delete_item(name, key)
                else:
                    self.put_item(name, attributes)
            raise
        finally:
            module.copy = module_copy

    _replace(backend_class, "transact_write_items", transact_write_items)
    _replace(backend_class, "_batchpilot_items_rollback", True)


def validators_find_processors_once() -> None:
    """moto's DynamoDB expression validators find each node's processor by the node's class once.

    moto 5.2's ``DepthFirstTraverser.traverse_node_recursively`` asks, for every node it visits,
    ``isinstance(node, Node)`` and ``isinstance(node, self.nodes_to_be_processed())`` (moto's node
    classes are ABCs: the slow path), and ``process`` then rebuilds the processor's whole
    ``_processing_map()`` (a dict of bound methods) to look the node up again; an
    UpdateExpression goes through about ten processors, each over every node, twice for a new
    item. The map's keys are node classes fixed per processor class, so each processor class now
    remembers, per node class, the method ``process`` would call (the first key the class is a
    subclass of, in the map's order) and the traversal is otherwise moto's: the same order, the
    same ``pre_processing_of_child`` calls, the same replacement of a processed node in its
    parent. ``Node.find_clauses`` asks its ABC questions once per child class too. Upstream:
    ``upstream/02-expression-validator-dispatch.md``. Idempotent.
    """
    from moto.dynamodb.parsing import ast_nodes

    traverser: Any = getattr(ast_nodes, "DepthFirstTraverser")  # noqa: B009 - untyped in moto
    if "_batchpilot_processors_once" in vars(traverser):
        return
    node_base: Any = getattr(ast_nodes, "Node")  # noqa: B009
    nested_types = (getattr(ast_nodes, "Expression"), getattr(ast_nodes, "UpdateExpressionFunction"))  # noqa: B009
    is_node: dict[type, bool] = {}  # class -> isinstance(value, Node)
    tables: dict[type, dict[type, Any]] = {}  # processor class -> node class -> function or None
    unknown = object()

    def handler(self: Any, node_type: type) -> Any:
        table = tables.setdefault(type(self), {})
        function = table.get(node_type, unknown)
        if function is unknown:
            method = next(
                (m for key, m in self._processing_map().items() if issubclass(node_type, key)), None
            )
            if method is not None and getattr(method, "__self__", None) is not self:
                return method  # not a method of this processor: not kept
            function = table[node_type] = method.__func__ if method is not None else None
        return function.__get__(self) if function is not None else None

    def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
        kind = type(node)
        known = is_node.get(kind)
        if known is None:
            known = is_node[kind] = isinstance(node, node_base)
        if known:
            parent_node = node.parent
            if node.children is not None:
                for i, child_node in enumerate(node.children):
                    self.pre_processing_of_child(node, i)
                    self.traverse_node_recursively(child_node, i)
            method = handler(self, kind)
            if method is not None:
                node = method(node)
                node.parent = parent_node
                if parent_node:
                    parent_node.children[child_id] = node
        return node

    descends: dict[type, bool] = {}

    def find_clauses(self: Any, clause_types: Any) -> list[Any]:
        clauses: list[Any] = []
        for child in self.children or []:
            kind = type(child)
            if kind in clause_types:
                clauses.append(child)
                continue
            nested = descends.get(kind)
            if nested is None:
                nested = descends[kind] = isinstance(child, nested_types)
            if nested:
                clauses.extend(child.find_clauses(clause_types))
        return clauses

    _replace(traverser, "traverse_node_recursively", traverse_node_recursively)
    _replace(node_base, "find_clauses", find_clauses)
    _replace(traverser, "_batchpilot_processors_once", True)


def update_expressions_parsed_once() -> None:
    """moto parses each DynamoDB UpdateExpression text once (at most 512 texts kept).

    moto 5.2 parses an UpdateExpression on every UpdateItem, twice per update of a
    TransactWriteItems, although a program sends the same few texts with different values. The
    parsed tree is only read afterwards (``find_clauses``) or deep-copied before it is resolved
    against values (``UpdateExpressionValidator``), so one tree per text answers the same; a text
    that fails to parse is not kept (the next request fails the same way). Upstream:
    ``upstream/03-update-expression-parse-cache.md``. Idempotent.
    """
    from moto.dynamodb.parsing import expressions

    parser: Any = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 - untyped in moto
    if "_batchpilot_parsed_once" in vars(parser):
        return
    _replace(parser, "make", staticmethod(functools.lru_cache(maxsize=_PARSES_KEPT)(parser.make)))
    _replace(parser, "_batchpilot_parsed_once", True)


def input_paths_parsed_once() -> None:
    """moto's EventBridge parses each input-path expression once (at most 512 texts kept).

    For every event a rule sends to a target, moto 5.2's ``EventTemplateParser.parse`` parses the
    target's input paths (moto's default map of eight when the target has no InputTransformer)
    with ``jsonpath_ng.ext.parse``, which builds a new parser, yacc tables included, for each:
    about 3 ms a path, most of the time an event published by a function spends in the embedded
    AWS. A parsed path is only read (``find``), so one per text answers the same. While moto's
    parse runs, the ``parse`` it imports from ``jsonpath_ng.ext`` is a cached one; outside it,
    jsonpath_ng is as it was. Upstream: ``upstream/04-eventbridge-input-path-cache.md``.
    Idempotent.
    """
    import threading

    from jsonpath_ng import ext
    from moto.events import utils

    template_parser: Any = utils.EventTemplateParser
    if "_batchpilot_paths_once" in vars(template_parser):
        return
    original = template_parser.parse
    module: Any = ext
    plain = module.parse
    cached = functools.lru_cache(maxsize=_PARSES_KEPT)(plain)
    lock = threading.Lock()

    def parse(input_template: str, input_paths_map: dict[str, Any], event: Any) -> Any:
        with lock:  # the module attribute is swapped for moto's call only
            module.parse = cached
            try:
                return original(input_template, input_paths_map, event)
            finally:
                module.parse = plain

    _replace(template_parser, "parse", staticmethod(parse))
    _replace(template_parser, "_batchpilot_paths_once", True)


def retention_read_directly() -> None:
    """moto's SQS retention check of each message reads the queue's retention period directly.

    moto 5.2's ``SQSBackend.is_message_valid_based_on_retention_period`` (run for every message
    of a queue on every receive) asks ``get_queue_attributes`` for one attribute, which builds the
    queue's whole attribute dict three times, converting every attribute name; it now reads the
    queue's ``message_retention_period``, the value that dict holds, against the same clock
    (the SQS module's ``unix_time``). Upstream: ``upstream/05-sqs-retention-check.md``.
    Idempotent.
    """
    from moto.sqs import models

    backend: Any = models.SQSBackend
    if "_batchpilot_retention_read" in vars(backend):
        return
    module: Any = models

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > module.unix_time())

    _replace(
        backend, "is_message_valid_based_on_retention_period", is_message_valid_based_on_retention_period
    )
    _replace(backend, "_batchpilot_retention_read", True)
