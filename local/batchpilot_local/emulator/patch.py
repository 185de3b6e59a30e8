"""The one module that touches moto's internals: it puts the emulator in front of moto.

What it patches: moto answers every botocore request through one object,
``moto.core.models.botocore_stubber`` (registered as a ``before-send`` handler on every botocore
session), whose ``__call__`` asks ``self.process_request(request)`` for the answer. :func:`install`
sets an instance attribute ``process_request`` on that object, which shadows the class's method:
the emulator's handler sees each request first and hands what it does not answer to moto's own
method. :func:`uninstall` deletes the attribute, and the method shows through again.

Why: moto 5.2 answers "Not yet implemented" for the Batch service-job APIs, and answering them
here keeps the whole botocore path real (serialisation, parameter validation, retries, the
response parser) for the code under test. A second ``before-send`` handler would not do: botocore
calls every handler, so moto would answer (and act on) the same request too.

Everything else the emulator needs from moto is public: its backend registries (read only), its
response base class (account and region of a request) and its paginator.

The other functions here change no answer, only what moto costs to give it: a replay of a job
event archive spends most of its time inside moto (TransactWriteItems, UpdateItem, SQS), so
:func:`cheap_transaction_rollback`, :func:`cheap_expression_traversal`, :func:`cheap_sqs_bookkeeping`,
:func:`cached_update_expressions` and :func:`cached_name_conversion` remove work moto repeats per
call, and :func:`untracked_model_instances` lets moto's objects go once nothing uses them.
``tests/integration/test_transaction_rollback.py`` and the emulator's own tests check that
the answers stay the same; ``benchmarks/bench_replay.py`` measures what they save.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from batchpilot_local.emulator.core import Response

__all__ = [
    "Handler",
    "cached_method_names",
    "cached_name_conversion",
    "cached_update_expressions",
    "cheap_expression_traversal",
    "cheap_sqs_bookkeeping",
    "cheap_sqs_clock",
    "cheap_transaction_rollback",
    "install",
    "installed",
    "matches_each",
    "shallow_received_messages",
    "uninstall",
    "untracked_model_instances",
]

Handler = Callable[[Any], Response | None]
"""Answers a botocore ``AWSPreparedRequest``, or returns None to let moto answer it."""


def _stubber() -> Any:
    from moto.core.models import botocore_stubber

    return botocore_stubber


def installed() -> bool:
    """Whether a handler is in front of moto's."""
    return "process_request" in vars(_stubber())


def install(handler: Handler) -> None:
    """Put ``handler`` in front of moto's request processing.

    Raises:
        RuntimeError: a handler is installed already (one emulator at a time).
    """
    stubber = _stubber()
    if installed():
        raise RuntimeError("an emulator is already installed in front of moto")
    moto_process: Handler = stubber.process_request  # the class's method, bound

    def process_request(request: Any) -> Response | None:
        answer = handler(request)
        return answer if answer is not None else moto_process(request)

    stubber.process_request = process_request


def uninstall() -> None:
    """Remove the handler, if any: moto answers everything again. Idempotent."""
    vars(_stubber()).pop("process_request", None)


def cheap_transaction_rollback() -> None:
    """Make moto's ``TransactWriteItems`` keep a copy of the items it touches instead of the tables.

    moto 5's ``DynamoDBBackend.transact_write_items`` deep-copies every table a transaction names
    (once per operation) so that it can roll back; with a ledger that writes one transaction per
    job event into one StateTable, each event then copies the whole table: time quadratic in the
    replayed events and a peak memory of several table copies. A transaction only changes the
    items it names, so keeping those items (or their absence) and putting them back is the same
    rollback. Idempotent; process-wide (moto's class is patched once).
    """
    import copy

    from moto.dynamodb import models

    backend_class = models.DynamoDBBackend
    if getattr(backend_class, "_batchpilot_cheap_rollback", False):
        return
    original = backend_class.transact_write_items

    class _NoTableCopy:
        """``copy`` as moto's module sees it while a transaction runs: tables are not copied."""

        def __getattr__(self, name: str) -> Any:
            return getattr(copy, name)

        @staticmethod
        def deepcopy(value: Any, memo: Any = None) -> Any:
            table_class = getattr(models, "Table")  # noqa: B009 - not exported by moto
            return value if isinstance(value, table_class) else copy.deepcopy(value, memo)

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
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
            except Exception:
                current = False
            if current is not False:
                snapshot = copy.deepcopy(current.to_json()["Attributes"]) if current else None
                saved.append((name, key, snapshot))
        module_copy = getattr(models, "copy")  # noqa: B009 - not exported: the module's own import
        setattr(models, "copy", _NoTableCopy())  # noqa: B010
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
            setattr(models, "copy", module_copy)  # noqa: B010

    backend_class.transact_write_items = transact_write_items  # type: ignore[method-assign]
    backend_class._batchpilot_cheap_rollback = True  # type: ignore[attr-defined]


def cheap_expression_traversal() -> None:
    """Make moto's DynamoDB expression validators compute each processor's node types once.

    moto 5's ``DepthFirstTraverser.traverse_node_recursively`` asks ``nodes_to_be_processed()``
    for every node it visits, and that builds the processor's whole ``_processing_map()`` (a dict
    of bound methods) each time; an UpdateExpression of ten actions goes through about ten
    processors, so each UpdateItem or TransactWriteItems update rebuilt thousands of dicts, most
    of a replayed event's DynamoDB time. The map's keys are node classes fixed per processor
    class, so remembering them per processor instance answers the same. Idempotent; process-wide.
    """
    from moto.dynamodb.parsing import ast_nodes

    traverser: Any = getattr(ast_nodes, "DepthFirstTraverser")  # noqa: B009 - untyped in moto
    if getattr(traverser, "_batchpilot_cached_node_types", False):
        return

    def nodes_to_be_processed(self: Any) -> tuple[type, ...]:
        cached: tuple[type, ...] | None = self.__dict__.get("_batchpilot_node_types")
        if cached is None:
            cached = tuple(self._processing_map().keys())
            self.__dict__["_batchpilot_node_types"] = cached
        return cached

    traverser.nodes_to_be_processed = nodes_to_be_processed
    traverser._batchpilot_cached_node_types = True


def cached_name_conversion() -> None:
    """Memoise moto's ``camelcase_to_underscores`` in every moto module that imported it.

    moto's SQS ``Queue.attributes`` converts each attribute name on every access, and moto reads
    it on every SendMessage and ReceiveMessage: about 60 regex-free character loops per message,
    a third of a replayed event's SQS time. The function is pure and its inputs are a few hundred
    API names, so an unbounded cache answers the same. Idempotent; process-wide.
    """
    import functools
    import sys

    from moto.core import utils

    original = utils.camelcase_to_underscores
    if getattr(original, "_batchpilot_cached", False):
        return
    cached = functools.cache(original)
    cached._batchpilot_cached = True  # type: ignore[attr-defined]
    for name, module in list(sys.modules.items()):
        if (name == "moto" or name.startswith("moto.")) and getattr(
            module, "camelcase_to_underscores", None
        ) is original:
            setattr(module, "camelcase_to_underscores", cached)  # noqa: B010


def cached_update_expressions() -> None:
    """Make moto parse each DynamoDB UpdateExpression text once, and copy the parsed tree cheaply.

    moto 5 parses an UpdateExpression on every UpdateItem, twice per update of a
    TransactWriteItems (once to check the names used, once to apply it), although the ledger and
    the alerts store send the same few texts with different values. The parsed tree is only read
    afterwards (``find_clauses``) or deep-copied before it is resolved against values
    (``Validator.__init__``), so sharing one tree per text answers the same. At most 512 texts
    are kept.

    The validator's copy of a shared tree is made from the tree's pickle, taken once per text:
    the same nodes, children and parent links as ``copy.deepcopy`` makes (the tree holds only
    nodes, lists and strings), about five times faster. Any other value the validators module
    copies still goes through ``deepcopy``. Idempotent; process-wide.
    """
    import copy
    import functools
    import pickle

    from moto.dynamodb.parsing import expressions, validators

    parser: Any = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 - untyped in moto
    if getattr(parser, "_batchpilot_cached_make", False):
        return
    make = parser.make  # the classmethod, bound to the class
    pickled: dict[int, tuple[Any, bytes]] = {}  # id(tree) -> (tree, its pickle), trees in the cache

    @functools.lru_cache(maxsize=512)
    def cached_make(expression_str: str) -> Any:
        tree = make(expression_str)
        if len(pickled) >= 512:
            pickled.clear()  # trees evicted from the cache must not keep their ids here
        pickled[id(tree)] = (tree, pickle.dumps(tree, pickle.HIGHEST_PROTOCOL))
        return tree

    deep = copy.deepcopy

    def deepcopy(value: Any, memo: Any = None) -> Any:
        entry = pickled.get(id(value))
        if entry is not None and entry[0] is value:
            return pickle.loads(entry[1])  # noqa: S301 - our own pickle of moto's parse tree
        return deep(value, memo)

    parser.make = staticmethod(cached_make)
    module: Any = validators
    module.deepcopy = deepcopy
    parser._batchpilot_cached_make = True


def untracked_model_instances() -> None:
    """Stop moto from keeping every model object it ever made (S3's excepted).

    moto 5's ``BaseModel.__new__`` appends each new instance to its class's
    ``instances_tracked`` list, for the moto server's dashboard; nothing else reads it but S3's
    reset (which closes the buffers of ``FakeKey`` and ``FakeMultipart``). Every SQS message sent
    and every DynamoDB item version then stays in memory until the mock is reset: a replay's
    memory grew with each event although the queues were empty and the table small. S3 models
    are still tracked. Idempotent; process-wide.
    """
    from moto.core import common_models

    base: Any = common_models.BaseModel
    if getattr(base, "_batchpilot_untracked", False):
        return
    tracked_new = base.__new__

    def __new__(cls: type, *args: Any, **kwargs: Any) -> Any:
        if cls.__module__.startswith("moto.s3."):
            return tracked_new(cls, *args, **kwargs)
        return super(base, cls).__new__(cls)

    base.__new__ = staticmethod(__new__)
    base._batchpilot_untracked = True


def cheap_sqs_bookkeeping() -> None:
    """Make two per-message steps of moto's SQS cheaper, with the same results.

    - ``SQSBackend.is_message_valid_based_on_retention_period`` asks ``get_queue_attributes`` for
      one attribute, which builds the queue's whole attribute dict three times; it now reads the
      queue's ``message_retention_period`` (the value that dict holds) directly.
    - ``generate_receipt_handle`` drew 185 ``random.choice`` letters per receive; it now draws
      185 lowercase letters from one ``secrets.token_bytes`` call (receipt handles are opaque:
      only their uniqueness matters).

    Idempotent; process-wide.
    """
    import secrets
    import string

    from moto.core.utils import unix_time
    from moto.sqs import models

    backend: Any = models.SQSBackend
    if getattr(backend, "_batchpilot_cheap_bookkeeping", False):
        return

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > unix_time())

    letters = string.ascii_lowercase

    def generate_receipt_handle() -> str:
        return "".join(letters[b % 26] for b in secrets.token_bytes(185))

    backend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period
    models.generate_receipt_handle = generate_receipt_handle  # type: ignore[attr-defined]
    backend._batchpilot_cheap_bookkeeping = True


def cheap_sqs_clock() -> None:
    """Give moto's SQS models the current time without building two datetimes per reading.

    moto's ``unix_time()`` takes ``utcnow()`` and subtracts ``utcfromtimestamp(0)`` each time, and
    its SQS ``Message.visible`` and ``Message.delayed`` read it for every message of a queue on
    every receive: in a replay, about 50 readings per event. With no argument the value is the
    epoch seconds ``time.time()`` returns (both read the system clock; freezegun patches both),
    so the SQS module now reads that directly; a call with a datetime still goes to moto.
    Idempotent; process-wide.
    """
    import time

    from moto.core import utils
    from moto.sqs import models

    module: Any = models
    if getattr(module, "_batchpilot_cheap_clock", False):
        return
    original_seconds = utils.unix_time

    def unix_time(dt: Any = None) -> float:
        return time.time() if dt is None else original_seconds(dt)

    def unix_time_millis(dt: Any = None) -> float:
        return unix_time(dt) * 1000.0

    module.unix_time = unix_time
    module.unix_time_millis = unix_time_millis
    module._batchpilot_cheap_clock = True


def shallow_received_messages() -> None:
    """Let moto's SQS ``receive_message`` copy each received message shallowly.

    moto deep-copies every received ``Message`` so that filtering its message attributes (which
    assigns a new ``message_attributes`` dict to the copy) leaves the queued message as it was.
    A shallow copy does the same for that: the queued message keeps its own dict, and the body
    and attribute values are immutable strings and bytes that nothing writes to. The module's
    other deep copies (pending message groups, CloudFormation properties) stay deep.
    Idempotent; process-wide.
    """
    import copy

    from moto.sqs import models

    module: Any = models
    if getattr(module, "_batchpilot_shallow_messages", False):
        return
    deep = copy.deepcopy
    message_class = models.Message

    def deepcopy(value: Any, memo: Any = None) -> Any:
        if type(value) is message_class:
            return copy.copy(value)
        return deep(value, memo)

    module.deepcopy = deepcopy
    module._batchpilot_shallow_messages = True


def matches_each(patterns: Sequence[Any], event: Mapping[str, Any]) -> list[bool]:
    """Whether each of moto's ``EventPattern`` objects matches ``event``, as
    ``pattern.matches_event(event)`` answers, with the event prepared once for all of them.

    ``matches_event`` copies the event through ``json.dumps``/``json.loads`` and flattens it
    for every pattern; a replay asks five rules about each input event. This does the copy and
    the flattening once and then asks moto's own matcher (``_does_event_match``) per pattern.
    """
    from moto.events.models import EventPattern

    flat: dict[str, Any] | None = None
    answers = []
    for pattern in patterns:
        raw = pattern.get_pattern()
        if not raw:
            answers.append(True)
            continue
        if flat is None:
            flat = EventPattern._flatten_dict(json.loads(json.dumps(event)))
        answers.append(bool(pattern._does_event_match(flat, raw)))
    return answers


def cached_method_names() -> None:
    """Memoise, per response class, the list of action methods moto looks an action up in.

    moto's ``BaseResponse.call_action`` calls ``method_names_from_class(self.__class__)`` on every
    request, which walks the class with ``inspect.getmembers``: for DynamoDB about a hundred
    members and a sort per UpdateItem. A response class's functions do not change once moto is
    imported (nothing here adds any to them), so one list per class answers the same.
    Idempotent; process-wide.
    """
    import functools

    from moto.core import responses

    module: Any = responses
    original = module.method_names_from_class
    if getattr(original, "_batchpilot_cached", False):
        return
    cached = functools.cache(original)
    cached._batchpilot_cached = True  # type: ignore[attr-defined]
    module.method_names_from_class = cached
