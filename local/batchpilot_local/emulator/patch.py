"""The one module that touches moto's (and botocore's) internals: it puts the emulator in front
of moto, and makes the embedded AWS cheaper to call.

What it patches: moto answers every botocore request through one object,
``moto.core.models.botocore_stubber`` (registered as a ``before-send`` handler on every botocore
session), whose ``__call__`` asks ``self.process_request(request)`` for the answer. :func:`install`
sets an instance attribute ``process_request`` on that object, which shadows the class's method:
the emulator's handler sees each request first and hands what it does not answer to moto's own
method. :func:`uninstall` deletes the attribute, and the method shows through again.

Why: moto 5.2 answers "Not yet implemented" for the Batch service-job APIs, and answering them
here keeps the whole botocore path real (serialisation, parameter validation, retries, the
response parser) for the code under test. A second ``before-send`` handler would not do: botocore
calls every handler, so moto would answer (and act on) the same request too. (The replay, for
speed, answers DynamoDB calls and the emulator's reads earlier, at ``before-call``, keeping
serialisation, validation and the parser but not the HTTP hop and its retries:
:func:`direct_dynamodb_calls`, :func:`direct_emulator_reads`.)

Everything else the emulator needs from moto is public: its backend registries (read only), its
response base class (account and region of a request) and its paginator.

The other functions here change no answer, only what moto (and botocore, for
:func:`cached_user_agent` and the direct calls) costs to give it in time or memory (one exception: after
:func:`bounded_deleted_receipt_handles` a second DeleteMessage of a message deleted more than
:data:`DELETED_MESSAGES_REMEMBERED` deletions ago gets ``ReceiptHandleIsInvalid`` instead of
succeeding): a replay of a job event archive spends most of its time in the embedded AWS, so
they remove work repeated on every call and memory kept for every event:

- DynamoDB: :func:`cheap_transaction_rollback`, :func:`cheap_expression_traversal`,
  :func:`cached_update_expressions` (one parse per text, cheap copies of the tree),
  :func:`cached_condition_tokens`, :func:`cached_condition_parses` (one tree per text, names and
  values), :func:`single_item_size_check`;
- SQS: :func:`cheap_sqs_bookkeeping`, :func:`cheap_sqs_clock`, :func:`shallow_received_messages`,
  :func:`cached_name_conversion`;
- every request: :func:`cached_request_routes`, :func:`cached_method_names`, :func:`light_json_requests`,
  :func:`cheap_random_strings` (moto's request ids), :func:`cheap_structure_members` (moto's
  answers' structures), and botocore's :func:`cached_user_agent`;
- EventBridge: :func:`matches_each` asks moto's matcher with the event prepared once, and
  :func:`cached_event_input_paths` parses a target's input paths once;
- DynamoDB Query: :func:`single_partition_queries` reads the queried partition, not the table;
- for the replay only (``EmbeddedAws(direct_calls=True)``): :func:`direct_dynamodb_calls` answers
  a client's DynamoDB calls from moto's handler, and :func:`direct_emulator_reads` the emulator's
  Batch and SageMaker reads, at botocore's ``before-call``, without the HTTP hop; botocore still
  validates and serialises each request and parses each answer
  (``tests/integration/test_direct_dynamodb.py`` and ``test_direct_emulator_reads.py`` compare
  the answers, HTTP status, headers (but the date and request id) and body of a scripted run and
  of random items with the HTTP path's; the HTTP path's retries are not taken);
- memory: :func:`untracked_model_instances` lets moto's objects go once nothing uses them;
  :func:`bounded_deleted_receipt_handles` keeps the receipt handles of each queue's newest
  :data:`DELETED_MESSAGES_REMEMBERED` deleted messages only, and :func:`spilled_dynamodb_items`
  keeps :data:`HOT_PARTITIONS` partitions of each table in memory and the rest in a temporary
  SQLite file: a replay's memory stays flat in the number of events.

``tests/integration/test_emulator_patches.py``, ``tests/integration/test_transaction_rollback.py``,
``tests/integration/test_direct_dynamodb.py`` and the emulator's own tests check that the answers
stay the same; ``benchmarks/bench_replay.py`` measures what they save.
"""

from __future__ import annotations

import copyreg
import functools
import io
import itertools
import json
import pickle
import sqlite3
import threading
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar, cast

from batchpilot_local.emulator.core import Response

__all__ = [
    "CONDITION_TREES_KEPT",
    "DELETED_MESSAGES_REMEMBERED",
    "DIRECT_DYNAMODB_ID",
    "DIRECT_READS_ID",
    "HOT_PARTITIONS",
    "READ_OPERATIONS",
    "REQUEST_ROUTES_KEPT",
    "STRUCTURE_PLANS_KEPT",
    "Handler",
    "RecentReceiptHandles",
    "SpilledPartitions",
    "bounded_deleted_receipt_handles",
    "cached_condition_parses",
    "cached_condition_tokens",
    "cached_event_input_paths",
    "cached_method_names",
    "cached_name_conversion",
    "cached_request_routes",
    "cached_update_expressions",
    "cached_user_agent",
    "cheap_expression_traversal",
    "cheap_random_strings",
    "cheap_sqs_bookkeeping",
    "cheap_sqs_clock",
    "cheap_structure_members",
    "cheap_transaction_rollback",
    "direct_dynamodb_answer",
    "direct_dynamodb_calls",
    "direct_emulator_reads",
    "install",
    "installed",
    "light_json_requests",
    "matches_each",
    "shallow_received_messages",
    "single_item_size_check",
    "single_partition_queries",
    "spilled_dynamodb_items",
    "uninstall",
    "untracked_model_instances",
]

Handler = Callable[[Any], Response | None]
"""Answers a botocore ``AWSPreparedRequest``, or returns None to let moto answer it."""

STRUCTURE_PLANS_KEPT = 4096
"""Structure shapes whose member look-ups :func:`cheap_structure_members` keeps (then it starts
again): a replay's answers use a few dozen; moto makes new shapes for each error answer."""

CONDITION_TREES_KEPT = 1024
"""Condition syntax trees :func:`cached_condition_parses` keeps (least recently used dropped)."""

REQUEST_ROUTES_KEPT = 512
"""Request URLs whose moto handler :func:`cached_request_routes` keeps (then it starts again)."""

_UNKNOWN = object()  # a cache miss (None is a cached answer)
_T = TypeVar("_T")


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
    """Make moto's DynamoDB expression validators find each node's processor by its type once.

    moto 5's ``DepthFirstTraverser.traverse_node_recursively`` asks, for every node it visits,
    ``isinstance(node, Node)`` and ``isinstance(node, self.nodes_to_be_processed())`` (moto's
    node classes are ABCs, so each check takes the slow path), and ``process`` then rebuilds the
    processor's whole ``_processing_map()`` (a dict of bound methods) to look the node up again;
    an UpdateExpression goes through about ten processors, each over every node, twice for a new
    item: most of a replayed conditional write's time in moto. The map's keys are node classes
    fixed per processor class, so each processor class now remembers, per node type, the
    method ``process`` would call (the first key the type is a subclass of, in the map's order,
    as ``isinstance`` answers) and the traversal is otherwise moto's: the same order, the same
    ``pre_processing_of_child`` calls, the same replacement of a processed node in its parent.
    Idempotent; process-wide.
    """
    from moto.dynamodb.parsing import ast_nodes

    traverser: Any = getattr(ast_nodes, "DepthFirstTraverser")  # noqa: B009 - untyped in moto
    if getattr(traverser, "_batchpilot_cached_node_types", False):
        return
    node_base: Any = getattr(ast_nodes, "Node")  # noqa: B009 - untyped in moto
    is_node: dict[type, bool] = {}  # node class (or str, ...) -> isinstance(value, Node)

    tables: dict[type, dict[type, Any]] = {}  # processor class -> node class -> function or None

    def handler(self: Any, node_type: type) -> Any:
        table = tables.get(type(self))
        if table is None:
            table = tables[type(self)] = {}
        function = table.get(node_type, _UNKNOWN)
        if function is _UNKNOWN:
            method = next(
                (method for key, method in self._processing_map().items() if issubclass(node_type, key)),
                None,
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

    # Node.find_clauses (which ActionCountValidator runs three times on every UpdateExpression
    # node) asks two ABC isinstance questions per child: answered once per child class here.
    descends: dict[type, bool] = {}
    nested_types = (getattr(ast_nodes, "Expression"), getattr(ast_nodes, "UpdateExpressionFunction"))  # noqa: B009

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

    traverser.traverse_node_recursively = traverse_node_recursively
    node_base.find_clauses = find_clauses
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
    - ``generate_receipt_handle`` drew 185 ``random.choice`` letters per receive; it is now 32
      hexadecimal digits (128 random bits) from one ``random.getrandbits`` call (``secrets``
      would ask the kernel each time, for nothing: receipt handles are opaque, only their
      uniqueness matters). moto keeps every deleted message's handles (so a second delete of one
      succeeds, as in SQS), so a shorter handle is also a third of the memory a replay keeps per
      message.

    Idempotent; process-wide.
    """
    import random

    from moto.sqs import models

    module: Any = models
    backend: Any = models.SQSBackend
    if getattr(backend, "_batchpilot_cheap_bookkeeping", False):
        return

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        # The SQS module's clock, so that :func:`cheap_sqs_clock` applies here too.
        return bool(retention + message.sent_timestamp / 1000 > module.unix_time())

    def generate_receipt_handle() -> str:
        return f"{random.getrandbits(128):032x}"

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


def matches_each(patterns: Sequence[Any], event: Mapping[str, Any], *, decoded: bool = False) -> list[bool]:
    """Whether each of moto's ``EventPattern`` objects matches ``event``, as
    ``pattern.matches_event(event)`` answers, with the event prepared once for all of them.

    ``matches_event`` copies the event through ``json.dumps``/``json.loads`` and flattens it
    for every pattern; a replay asks five rules about each input event. This does the copy and
    the flattening once and then asks moto's own matcher (``_does_event_match``) per pattern.
    ``decoded``: the event is fresh from ``json.loads`` (only JSON types, nothing else holds
    it), so the copy, which only normalises types, is skipped.
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
            flat = EventPattern._flatten_dict(event if decoded else json.loads(json.dumps(event)))
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


def light_json_requests() -> None:
    """Let moto read a botocore request of the ``json`` protocol without building a werkzeug one.

    moto's ``BaseResponse.parse_parameters`` turns every botocore request into a werkzeug
    ``Request`` (``Request.from_values``, a whole WSGI environ) and reads its ``values`` (which
    parses the body as a form) before its JSON parser, which for the ``json`` protocol reads the
    body alone: about a sixth of an embedded DynamoDB call. For a request whose Content-Type is
    ``application/x-amz-json-1.0`` or ``-1.1`` (DynamoDB, SQS, EventBridge, SageMaker, Secrets
    Manager), moto now gets an object with the same ``method``, ``path``, ``values`` (the query
    string), ``headers``, ``data`` and ``content_type``; gzip bodies and every other request
    still take moto's way. Idempotent; process-wide.
    """
    from urllib.parse import parse_qsl, unquote, urlparse

    from botocore.awsrequest import AWSPreparedRequest
    from moto.core import responses
    from werkzeug.datastructures import Headers, MultiDict

    module: Any = responses
    original = module.normalize_request
    if getattr(original, "_batchpilot_light", False):
        return
    json_types = {"application/x-amz-json-1.0", "application/x-amz-json-1.1"}

    class JsonRequest:
        __slots__ = ("content_type", "data", "headers", "method", "path", "values")

        def __init__(self, request: Any, content_type: str) -> None:
            url = urlparse(request.url)
            body = request.body or b""
            self.method = request.method
            self.path = unquote(url.path)
            self.values = MultiDict(parse_qsl(url.query, keep_blank_values=True))
            self.headers = Headers(list(request.headers.items()))
            self.data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
            self.content_type = content_type

    def normalize_request(request: Any) -> Any:
        if isinstance(request, AWSPreparedRequest):
            content_type = request.headers.get("Content-Type")
            if isinstance(content_type, bytes):
                content_type = content_type.decode("utf-8")
            encoding = request.headers.get("Content-Encoding")
            body = request.body
            if content_type in json_types and not encoding and isinstance(body, (bytes, bytearray, str)):
                return JsonRequest(request, content_type)
        return original(request)

    normalize_request._batchpilot_light = True  # type: ignore[attr-defined]
    module.normalize_request = normalize_request


def cached_user_agent() -> None:
    """Let botocore build each client's User-Agent text once per set of features.

    botocore rebuilds the User-Agent header from about twenty components on every request; the
    text changes only with the client's configuration (fixed once the client exists) and the
    feature ids in use (client features and the request context's), so one text per
    ``(configuration, features)`` answers the same. Idempotent; process-wide.
    """
    from botocore import useragent
    from botocore.context import get_context

    agent: Any = useragent.UserAgentString
    if getattr(agent, "_batchpilot_cached", False):
        return
    original = agent.to_string

    def to_string(self: Any) -> str:
        context = get_context()
        key = (
            id(self._client_config),
            frozenset(self._client_features or ()),
            frozenset(context.features if context is not None else ()),
        )
        entry: tuple[int, dict[Any, str]] | None = self.__dict__.get("_batchpilot_texts")
        if entry is None or entry[0] != id(self):  # a copy (with_client_config) starts afresh
            entry = (id(self), {})
            self.__dict__["_batchpilot_texts"] = entry
        cache = entry[1]
        text = cache.get(key)
        if text is None:
            text = cache[key] = original(self)
        return text

    agent.to_string = to_string
    agent._batchpilot_cached = True


def single_item_size_check() -> None:
    """Make moto check a new DynamoDB item's size once, not once per attribute.

    moto's ``Item.__init__`` stores attributes one at a time in a ``LimitedSizeDict``, whose
    ``__setitem__`` sums the size of every attribute already stored before adding one: quadratic
    in the attribute count (a ledger job record has about thirty). Sizes are never negative, so
    some prefix passes the 405,000-byte limit exactly when the whole item does: the item is now
    built whole and summed once, by the same formula, raising the same ``ItemSizeTooLarge``.
    Later writes to an item's attributes still go through ``LimitedSizeDict``. Idempotent;
    process-wide.
    """
    from moto.dynamodb.exceptions import ItemSizeTooLarge
    from moto.dynamodb.models import dynamo_type
    from moto.dynamodb.models.utilities import bytesize

    item_class: Any = dynamo_type.Item
    if getattr(item_class, "_batchpilot_single_size_check", False):
        return
    dynamo: Any = dynamo_type.DynamoType
    limited: Any = dynamo_type.LimitedSizeDict

    def size(part: Any) -> int:
        return int(part.size()) if type(part) is dynamo else int(bytesize(str(part)))

    def __init__(self: Any, hash_key: Any, range_key: Any, attrs: dict[str, Any]) -> None:
        self.hash_key = hash_key
        self.range_key = range_key
        built = limited()
        dict.update(built, ((key, dynamo(value)) for key, value in attrs.items()))
        if sum(size(key) + size(value) for key, value in built.items()) > 405000:  # moto's limit
            raise ItemSizeTooLarge
        self.attrs = built

    item_class.__init__ = __init__
    item_class._batchpilot_single_size_check = True


def cheap_structure_members() -> None:
    """Make moto's response serialiser find each member of a ``dict`` value by its possible keys
    worked out once per (structure, member), not once per value.

    For every member of every structure it serialises, moto's ``ResponseSerializer`` asks its
    ``XFormedAttributePicker`` for the member's value, which builds a context object and six alias
    providers and tries each possible key (the shape's name, the member's name, prefixes, the
    model's serialisation name, each also in snake case) on the value. A DynamoDB item is a
    structure of ten members per attribute (``S``, ``N``, ... ``BOOL``) with one of them present:
    most of a GetItem's answer time went there. For a plain ``dict`` value the possible keys
    depend only on the structure, the member and its shape (a ``dict`` has no ``Meta`` aliases
    and its class name is always ``dict``), so they are asked of moto's own picker once and kept;
    each value is then looked up under them in the same order, the picker's response transformers
    applied as moto applies them. Anything else (another type of value, another picker or alias
    list, a serialiser class whose ``get_value`` or ``_serialize_structure_member`` is not the base
    class's at the time of the call, a possible key with a dot, which moto reads as a path) takes
    moto's own code. At most :data:`STRUCTURE_PLANS_KEPT` structures' look-ups are kept.
    Idempotent; process-wide.
    """
    from moto.core import serialize

    base: Any = serialize.ResponseSerializer
    if getattr(base, "_batchpilot_cheap_members", False):
        return
    original = base._serialize_type_structure
    picker_class = serialize.XFormedAttributePicker
    providers = serialize.DEFAULT_ALIAS_PROVIDERS
    context_class = serialize.AttributePickerContext
    plain_members = base._serialize_structure_member
    plain_get_value = base.get_value
    plans: dict[int, tuple[Any, tuple[tuple[str, Any, tuple[str, ...]], ...] | None]] = {}

    def plan_of(picker: Any, shape: Any) -> tuple[tuple[str, Any, tuple[str, ...]], ...] | None:
        """Each member of ``shape`` with the keys moto's picker tries for it on a dict, in order;
        None when one of them holds a dot."""
        entry = plans.get(id(shape))
        if entry is None:
            steps = []
            for member_key, member_shape in shape.members.items():
                member_shape.parent = shape
                context = context_class(obj={}, key=member_key, shape=member_shape)
                steps.append((member_key, member_shape, tuple(picker.get_possible_keys(context))))
            dotted = any("." in key for _, _, keys in steps for key in keys)
            if len(plans) >= STRUCTURE_PLANS_KEPT:  # moto makes new error shapes per error answer
                plans.clear()
            # The shape is kept with its plan, so its id is not reused while the plan is cached.
            entry = plans[id(shape)] = (shape, None if dotted else tuple(steps))
        return entry[1]

    def _serialize_type_structure(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        picker = self._value_picker
        kind = type(self)
        if (
            kind._serialize_structure_member is not plain_members
            or kind.get_value is not plain_get_value
            or type(value) is not dict
            or type(picker) is not picker_class
            or picker.alias_providers is not providers
        ):
            original(self, serialized, value, shape, key)
            return
        plan = plan_of(picker, shape)
        if plan is None:
            original(self, serialized, value, shape, key)
            return
        wrapper: Any = self.MAP_TYPE() if key else serialized
        transformers = picker.response_transformers
        for member_key, member_shape, keys in plan:  # as moto's loop: parent, value, serialise
            member_shape.parent = shape
            member_value = None
            for possible in keys:
                if possible in value:
                    member_value = value[possible]
                    break
            if transformers:
                key_path = f"{'.'.join(self.path)}.{member_key}"
                for transform_path, transform in transformers.items():
                    if key_path.endswith(transform_path):
                        member_value = transform(member_value)
                        break
            if member_value is not None:
                self._serialize(wrapper, member_value, member_shape, member_key)
        if key:
            self._default_serialize(serialized, wrapper, shape, key)

    _serialize_type_structure.__wrapped__ = original  # type: ignore[attr-defined]  # moto's, for tests
    base._serialize_type_structure = _serialize_type_structure
    base._batchpilot_cheap_members = True


def cached_condition_tokens() -> None:
    """Make moto tokenise each DynamoDB ConditionExpression text once.

    moto's ``ConditionExpressionParser`` lexes the expression text with a list of regular
    expressions, token by token, on every conditional write, although the stores send the same
    few texts. The tokens depend on the text alone (names and values are resolved in later
    steps, which still run per call), so each text's tokens are kept (at most 512 texts) and
    every call gets fresh copies of them. Idempotent; process-wide.
    """
    from collections import deque

    from moto.dynamodb import comparisons

    parser: Any = comparisons.ConditionExpressionParser
    if getattr(parser, "_batchpilot_cached_tokens", False):
        return
    lex = parser._lex_condition_expression
    node_type = parser.Node
    known: dict[str, tuple[Any, ...] | None] = {}  # text -> its tokens (None: not flat, not kept)

    def _lex_condition_expression(self: Any) -> Any:
        text = self.condition_expression
        if text not in known:
            nodes = lex(self)
            if len(known) < 512:
                known[text] = None if any(n.children for n in nodes) else tuple(nodes)
            return nodes
        cached = known[text]
        if cached is None:
            return lex(self)
        return deque(node_type(n.nonterminal, n.kind, n.text, n.value, []) for n in cached)

    parser._lex_condition_expression = _lex_condition_expression
    parser._batchpilot_cached_tokens = True


def cached_condition_parses() -> None:
    """Make moto parse each DynamoDB condition once per text, names and values.

    moto builds a ConditionExpression's syntax tree on every conditional request, and PutItem
    builds it twice (once to check the names used, once to evaluate): about a quarter of a
    conditional PutItem's time. The tree depends only on the text, ExpressionAttributeNames and
    ExpressionAttributeValues, and evaluating it reads the item without changing the tree (no
    ``Op`` or operand sets an attribute outside ``__init__``), so a tree is reused for the same
    three, with the names and values it found. At most :data:`CONDITION_TREES_KEPT` are kept,
    the least recently used dropped first: a claim's condition holds the time, so most of those
    are used once. A parse that raises is not kept: the next request raises the same error. A
    miss still tokenises through :func:`cached_condition_tokens`. Idempotent; process-wide.
    """
    from moto.dynamodb import comparisons

    parser: Any = comparisons.ConditionExpressionParser
    if getattr(parser, "_batchpilot_cached_parses", False):
        return
    parse = parser.parse
    trees: OrderedDict[tuple[Any, ...], tuple[Any, tuple[str, ...], tuple[str, ...]]] = OrderedDict()
    lock = threading.Lock()

    def cached_parse(self: Any) -> Any:
        text = self.condition_expression
        if not text:
            return parse(self)
        key = (
            text,
            json.dumps(self.expression_attribute_names, sort_keys=True),
            json.dumps(self.expression_attribute_values, sort_keys=True, default=str),
        )
        with lock:
            hit = trees.get(key)
            if hit is not None:
                trees.move_to_end(key)
        if hit is None:
            names_before, values_before = len(self.expr_attr_names_found), len(self.expr_attr_values_found)
            tree = parse(self)
            found = (
                tuple(self.expr_attr_names_found[names_before:]),
                tuple(self.expr_attr_values_found[values_before:]),
            )
            with lock:
                trees[key] = (tree, *found)
                if len(trees) > CONDITION_TREES_KEPT:
                    trees.popitem(last=False)
            return tree
        tree, names, values = hit
        self.expr_attr_names_found.extend(names)
        self.expr_attr_values_found.extend(values)
        return tree

    parser.parse = cached_parse
    parser._batchpilot_unpatched_parse = parse  # for the tests that compare answers
    parser._batchpilot_condition_trees = trees
    parser._batchpilot_cached_parses = True


def cheap_random_strings() -> None:
    """Make moto draw its random identifiers in one call each.

    moto makes a request id (52 characters, on every DynamoDB response among others) and many
    other identifiers with ``MotoRandom.get_random_string``/``get_random_hex``, one
    ``random.choice`` call per character. ``Random.choices`` draws the same characters from the
    same pool, uniformly, in one call: the same format and distribution (a seeded ``mock_random``
    stays deterministic, with other values). Idempotent; process-wide.
    """
    import string

    from moto.moto_api._internal import moto_random

    random_class: Any = moto_random.MotoRandom
    if getattr(random_class, "_batchpilot_cheap_strings", False):
        return
    hex_chars = [str(c) for c in moto_random.HEX_CHARS]

    def get_random_string(
        self: Any, length: int = 20, include_digits: bool = True, lower_case: bool = False
    ) -> str:
        pool = string.ascii_letters + string.digits if include_digits else string.ascii_letters
        text = "".join(self.choices(pool, k=length))
        return text.lower() if lower_case else text

    def get_random_hex(self: Any, length: int = 8) -> str:
        return "".join(self.choices(hex_chars, k=length))

    random_class.get_random_string = get_random_string
    random_class.get_random_hex = get_random_hex
    random_class._batchpilot_cheap_strings = True


def cached_request_routes() -> None:
    """Make moto find the handler of a request's URL once per URL.

    For every request moto's ``BotocoreStubber.process_request`` matches the URL against each
    service's pattern in turn (DynamoDB's after about a hundred others), then builds that
    backend's URL map (``BaseBackend.urls``) and matches its patterns: about a tenth of an
    embedded DynamoDB call. The handler depends on the URL alone (the map's handlers are the
    objects of the service's ``urls.url_paths``, the same on every call), so each URL's
    ``(service, handler)`` is kept (at most :data:`REQUEST_ROUTES_KEPT`; then the map starts
    again). The rest is moto's: passthrough and whitelist checks on every request, header values
    decoded, the recorder, ``HTTPException`` answers; a URL no service claims goes to moto's own
    method (its "Not yet implemented" answer). Idempotent; process-wide.
    """
    import re

    import moto.backend_index as backend_index
    import moto.backends as backends
    from moto.core import DEFAULT_ACCOUNT_ID, botocore_stubber  # type: ignore[attr-defined]
    from moto.core.base_backend import BackendDict
    from moto.core.config import passthrough_service, passthrough_url, service_whitelisted
    from moto.core.utils import get_equivalent_url_in_aws_domain
    from moto.moto_api import recorder
    from werkzeug.exceptions import HTTPException  # what moto's errors derive from

    stubber_class: Any = botocore_stubber.BotocoreStubber
    if getattr(stubber_class, "_batchpilot_cached_routes", False):
        return
    original = stubber_class.process_request
    routes: dict[str, tuple[str, Any] | None] = {}

    def find(clean_url: str) -> tuple[str, Any] | None:
        # moto's own search, as in BotocoreStubber.process_request (moto 5.2).
        for service, pattern in backend_index.backend_url_patterns:
            if not pattern.match(clean_url):
                continue
            backend_dict: Any = backends.get_backend(service)  # type: ignore[call-overload]
            if isinstance(backend_dict, BackendDict):
                regions = backend_dict[DEFAULT_ACCOUNT_ID]
                backend = regions["us-east-1"] if "us-east-1" in regions else regions["aws"]
            else:
                backend = backend_dict["global"]
            for url, handler in backend.urls.items():
                if re.compile(url).match(clean_url):
                    return service, handler
            return None  # moto stops at the first service whose pattern matches, too
        return None

    def process_request(self: Any, request: Any) -> Any:
        parsed_url, _ = get_equivalent_url_in_aws_domain(request.url)
        clean_url = f"{parsed_url.scheme}://{parsed_url.netloc}{parsed_url.path}"
        if clean_url in routes:
            route = routes[clean_url]
        else:
            route = find(clean_url)
            if len(routes) >= REQUEST_ROUTES_KEPT:
                routes.clear()
            routes[clean_url] = route
        if route is None or passthrough_url(clean_url):
            return original(self, request)
        service, handler = route
        if passthrough_service(service) or not service_whitelisted(service):
            return original(self, request)  # moto's answer: passed through, or refused
        for header, value in list(request.headers.items()):
            if isinstance(value, bytes):
                request.headers[header] = value.decode("utf-8")
        try:
            recorder._record_request(request)
            status, headers, body = handler(request, request.url, request.headers)
        except HTTPException as exc:
            status, headers, body = exc.code, exc.get_headers(), exc.get_body()
        return status, headers, body

    stubber_class.process_request = process_request
    stubber_class._batchpilot_unpatched_process_request = original  # for the tests
    stubber_class._batchpilot_request_routes = routes
    stubber_class._batchpilot_cached_routes = True


def cached_event_input_paths() -> None:
    """Make moto's EventBridge parse each input-path expression once.

    For every event a rule sends to a target, moto's ``EventTemplateParser.parse`` reads the
    target's input paths (moto's default map when the target has no InputTransformer: about ten
    paths) with ``jsonpath_ng.ext.parse``, which builds a new parser, yacc tables included, for
    each: most of the time an own event (``Recovery Skipped``, ``Job Starving``) spends in the
    embedded AWS. A parsed path is only read (``find``), so one per expression text (at most
    512) answers the same. Idempotent; process-wide.
    """
    import functools

    from jsonpath_ng import ext

    module: Any = ext
    original = module.parse
    if getattr(original, "_batchpilot_cached", False):
        return
    cached = functools.lru_cache(maxsize=512)(original)
    cached._batchpilot_cached = True  # type: ignore[attr-defined]
    module.parse = cached


# ---------------------------------------------------------------------------------------- memory

DELETED_MESSAGES_REMEMBERED = 1_024
"""Deleted messages per SQS queue whose receipt handles moto still accepts again (see
:func:`bounded_deleted_receipt_handles`). A repeated delete of one message comes from the same
batch (at most 10 messages) or a retry of it, a few batches later at most: a thousand messages
covers that a hundred times over. Memory: 1,024 messages x (receives per message, 1 in a replay)
x about 130 bytes (a 32-digit handle and its dict slot): some 130 KB per queue at most."""


class RecentReceiptHandles:
    """The receipt handles of the newest :data:`DELETED_MESSAGES_REMEMBERED` (or ``messages``)
    deleted messages of one queue: moto's ``Queue.deleted_messages`` (a ``set[str]`` that grew
    forever), bounded.

    One :meth:`update` call is one deleted message (moto passes ``message.all_receipt_handles``,
    one handle per receive of it, and ``None``: the handle moto records for it before its first
    receive); :meth:`add` remembers a message of one handle. Once more than ``messages`` messages
    are remembered, the handles of the oldest are forgotten. Supports ``in``, ``len`` (handles,
    not messages), iteration (handles, oldest first), ``update``, ``add`` and ``discard``: what
    moto's SQS models use.

    Raises:
        ValueError: ``messages`` < 1.
    """

    __slots__ = ("_handles", "_messages", "_next", "limit")

    def __init__(self, messages: int | None = None) -> None:
        limit = DELETED_MESSAGES_REMEMBERED if messages is None else messages
        if limit < 1:
            raise ValueError(f"messages must be at least 1, not {limit}")
        self.limit = limit
        self._handles: dict[str | None, int] = {}  # handle -> number of the message it came with
        self._messages: deque[tuple[int, tuple[str | None, ...]]] = deque()  # oldest first
        self._next = 0

    def __contains__(self, handle: object) -> bool:
        return handle in self._handles

    def __len__(self) -> int:
        return len(self._handles)

    def __iter__(self) -> Iterator[str | None]:
        return iter(self._handles)

    def __repr__(self) -> str:
        return f"RecentReceiptHandles({len(self._messages)} messages, {len(self._handles)} handles)"

    def update(self, *messages: Iterable[str | None]) -> None:
        """Remember each iterable as the handles of one more deleted message."""
        for handles in messages:
            number = self._next
            self._next += 1
            kept = tuple(handles)
            for handle in kept:
                self._handles[handle] = number
            self._messages.append((number, kept))
        while len(self._messages) > self.limit:
            number, old = self._messages.popleft()
            for handle in old:
                if self._handles.get(handle) == number:  # not remembered again since
                    del self._handles[handle]

    def add(self, handle: str | None) -> None:
        """Remember a deleted message of one handle."""
        self.update((handle,))

    def discard(self, handle: str | None) -> None:
        """Forget ``handle``, if remembered."""
        self._handles.pop(handle, None)


def bounded_deleted_receipt_handles() -> None:
    """Make each moto SQS queue remember the receipt handles of its newest deleted messages only.

    moto's ``Queue.delete_message`` adds every handle a deleted message ever had to the queue's
    ``deleted_messages`` set, so that deleting it again succeeds, and never removes any: about
    245 bytes per replayed event, for the whole replay. Each queue created from now on gets a
    :class:`RecentReceiptHandles` instead, which keeps the handles of the newest
    :data:`DELETED_MESSAGES_REMEMBERED` deleted messages (moto's only uses: ``in`` and
    ``update``). A repeated delete of one of those still succeeds, as in moto; a delete with
    the handle of an older deleted message gets ``ReceiptHandleIsInvalid``, moto's answer for a
    handle it does not know. SQS does not keep a handle forever either: the DeleteMessage API
    reference says a receipt handle belongs to one receive of a message (each receive gives a
    new one, and only the newest is sure to delete it) and lists ``ReceiptHandleIsInvalid``, "the
    specified receipt handle isn't valid"; a handle whose visibility timeout has passed has
    expired (real SQS then answers ``InvalidParameterValue``, "the receipt handle has expired",
    says AWS's knowledge-center article on receipt handle errors; moto never does). Idempotent;
    process-wide (queues that exist already keep their set).
    """
    import functools

    from moto.sqs import models

    queue_class: Any = models.Queue
    if getattr(queue_class, "_batchpilot_bounded_handles", False):
        return
    original = queue_class.__init__

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self.deleted_messages = RecentReceiptHandles()

    queue_class.__init__ = __init__
    queue_class._batchpilot_bounded_handles = True


HOT_PARTITIONS = 1_000
"""Partitions (hash keys) of each moto DynamoDB table kept in memory by
:func:`spilled_dynamodb_items`, the least recently touched written to disk beyond them. A replay
touches a job's partitions (about two: its ledger record, its alerts record; a few markers)
within a few events of each other, and the shared ones (per-queue aggregates, indexes, the queue
list) on every event: a thousand keeps some 500 jobs in flight at once hot. Memory: about 5.4 KB
of moto objects per partition (measured on the benchmark's archive; 0.9 KB pickled), some 5 MB
per table. A partition touched after it was spilled costs an SQLite lookup and an unpickle (about 15 us), one
written out a pickle and an insert (about 30 us)."""


class _SpillState:
    """Process-wide state of :func:`spilled_dynamodb_items`: the limit in force, the stores that
    went over it since the last eviction, and the DynamoDB requests being answered (eviction
    waits until none is)."""

    def __init__(self) -> None:
        self.limit = HOT_PARTITIONS
        # serial number -> store over the limit (weakly: a table may go before the next request)
        self.over: weakref.WeakValueDictionary[int, SpilledPartitions] = weakref.WeakValueDictionary()
        self.serials = itertools.count()
        self.in_flight = 0
        self.lock = threading.Lock()
        self.dispatch: dict[type, Any] = dict(copyreg.dispatch_table)  # pickling, see _attributes
        self.attributes_class: Any = dict  # moto's LimitedSizeDict once installed
        self.dynamo_type: Any = None  # moto's DynamoType once installed

    def evict_all(self) -> None:
        """Every store that went over the limit, down to nine tenths of it
        (:meth:`SpilledPartitions.evict`)."""
        while self.over:
            _, store = self.over.popitem()
            store.evict(self.limit)


_spill = _SpillState()
_ABSENT: Any = object()  # no such partition (None could be a value)


def _canon(key: Any) -> Any:
    """The dict key a partition key stands under: ``(type, cast_value)`` for a moto
    ``DynamoType``, which is what its ``__hash__`` hashes and its ``__eq__`` compares (so the
    same partitions match), computed without its Python-level methods; any other key as it is."""
    if type(key) is _spill.dynamo_type:
        kind = key.type
        if kind == "S" or kind == "B":  # cast_value is the value itself
            return (kind, key.value)
        if kind == "N":
            return (kind, Decimal(key.value))
        return (kind, key.cast_value)
    return key


def _attributes(plain: dict[str, Any]) -> Any:
    """A moto ``LimitedSizeDict`` holding ``plain``'s entries, without its per-entry size check
    (the item passed it when it was written): what a spilled item's ``attrs`` unpickles to."""
    kind = _spill.attributes_class
    built = kind.__new__(kind)
    dict.update(built, plain)
    return built


def _reduce_attributes(attributes: dict[str, Any]) -> tuple[Any, tuple[dict[str, Any]]]:
    """Pickle an item's ``LimitedSizeDict`` as a plain dict: the default would unpickle it
    through its ``__setitem__``, which sums the whole item on every attribute."""
    return _attributes, (dict(attributes),)


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _spill.dispatch
    pickler.dump(value)
    return buffer.getvalue()


def _loads(raw: bytes) -> Any:
    return pickle.loads(raw)  # noqa: S301 - our own pickle of moto's objects, in our own database


class SpilledPartitions(MutableMapping[Any, Any]):
    """moto's DynamoDB ``Table.items`` with only its recently touched partitions in memory.

    Shape, as moto's ``defaultdict(dict)``: hash key (a ``DynamoType``) -> partition, which is the
    ``Item`` (a table without a range key) or ``{range key DynamoType: Item}``. Reading a missing
    key with ``[]`` creates an empty ``{}`` partition, as a defaultdict does; ``get``, ``pop``,
    ``in`` and ``setdefault`` do not. Iteration follows the order in which partitions were first
    inserted, as a dict's does, spilled or not, and gives the key objects first inserted.

    In memory: the hot partitions, least recently touched first, under :func:`_canon` of their
    key (the ``(type, value)`` a ``DynamoType`` hashes and compares: the same matches as moto's
    dict, found without calling its methods twice per access). On disk, in a private SQLite
    database (``sqlite3.connect("")``: a temporary file SQLite deletes when the connection
    closes, opened at the first spill and closed when this object goes): one row per spilled
    partition with the key's hash, its insertion number, its item count, the pickled key and the
    pickled partition, found by the hash and then by comparing the stored key the same way. A key
    is either in memory or on disk, never both.

    Touching a spilled partition (any access by key; iterating touches them all) loads it, deletes
    its row and makes it hot. Nothing is written out except by :meth:`evict`, which
    :func:`spilled_dynamodb_items` calls between requests only: moto holds ``Item`` objects and
    changes them in place while it answers one.
    """

    def __init__(self) -> None:
        self._hot: OrderedDict[Any, Any] = OrderedDict()  # canon -> partition, least recent first
        self._meta: dict[Any, tuple[Any, int]] = {}  # canon -> (key as inserted, insertion number)
        self._next = 0
        self._cold = 0  # partitions on disk
        self._cold_items = 0  # the sum of their item counts
        self._db: sqlite3.Connection | None = None
        self._serial = next(_spill.serials)

    # ------------------------------------------------------------------ store
    def _connection(self) -> sqlite3.Connection:
        db = self._db
        if db is None:
            # check_same_thread off: moto may answer from another thread; it is never concurrent.
            db = sqlite3.connect("", isolation_level=None, check_same_thread=False)
            db.execute("PRAGMA journal_mode=MEMORY")
            db.execute("PRAGMA synchronous=OFF")  # a scratch file: nothing to recover after a crash
            db.execute(
                "CREATE TABLE p (seq INTEGER PRIMARY KEY, h INTEGER NOT NULL, n INTEGER NOT NULL,"
                " key BLOB NOT NULL, value BLOB NOT NULL)"
            )
            db.execute("CREATE INDEX p_h ON p (h)")
            self._db = db
            weakref.finalize(self, db.close)
        return db

    def _grew(self) -> None:
        if len(self._hot) > _spill.limit:
            _spill.over[self._serial] = self

    def _take(self, canon: Any, load: bool) -> tuple[Any, int, Any] | None:
        """Delete the row of the key whose canon is ``canon``: (the key as inserted, its insertion
        number, the partition if ``load``, else None), or None when it is not on disk."""
        if not self._cold:
            return None
        db = self._connection()
        rows = db.execute("SELECT seq, n, key, value FROM p WHERE h = ?", (hash(canon),)).fetchall()
        for seq, count, raw_key, raw in rows:
            stored = _loads(raw_key)
            if _canon(stored) == canon:
                db.execute("DELETE FROM p WHERE seq = ?", (seq,))
                self._cold -= 1
                self._cold_items -= count
                return stored, seq, _loads(raw) if load else None
        return None

    def _load(self, canon: Any) -> Any:
        """The spilled partition under ``canon``, made hot, or ``_ABSENT``."""
        found = self._take(canon, True)
        if found is None:
            return _ABSENT
        stored, seq, value = found
        self._hot[canon] = value
        self._meta[canon] = (stored, seq)
        self._grew()
        return value

    def _load_all(self) -> None:
        if not self._cold:
            return
        db = self._connection()
        rows = db.execute("SELECT seq, key, value FROM p ORDER BY seq").fetchall()
        db.execute("DELETE FROM p")
        self._cold = self._cold_items = 0
        for seq, raw_key, raw in rows:
            key = _loads(raw_key)
            canon = _canon(key)
            self._hot[canon] = _loads(raw)
            self._meta[canon] = (key, seq)
        self._grew()

    def _insert(self, canon: Any, key: Any, value: Any) -> None:
        self._hot[canon] = value
        self._meta[canon] = (key, self._next)
        self._next += 1
        self._grew()

    def evict(self, limit: int) -> int:
        """Write the least recently touched partitions to disk until nine tenths of ``limit``
        (>= 0) are in memory, once more than ``limit`` are; returns how many were written. Never
        call it while a request holds items."""
        limit = max(0, limit)
        if len(self._hot) <= limit:
            return 0
        # Down to nine tenths of the limit: one write to disk per hundred new partitions (at the
        # default limit), not one per request once the limit is reached.
        excess = len(self._hot) - (limit - limit // 10)
        rows = []
        for canon, value in itertools.islice(self._hot.items(), excess):
            key, seq = self._meta[canon]
            count = len(value) if isinstance(value, dict) else 1
            rows.append((seq, hash(canon), count, _dumps(key), _dumps(value)))
        db = self._connection()
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO p (seq, h, n, key, value) VALUES (?, ?, ?, ?, ?)", rows)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        for _ in range(excess):  # only now: a failed pickle or insert loses nothing
            canon, _value = self._hot.popitem(last=False)
            del self._meta[canon]
        self._cold += excess
        self._cold_items += sum(row[2] for row in rows)
        return excess

    @property
    def in_memory(self) -> int:
        """Partitions held in memory."""
        return len(self._hot)

    @property
    def on_disk(self) -> int:
        """Partitions written to disk."""
        return self._cold

    def item_count(self, by_length: bool) -> int:
        """moto's ``Table.__len__`` without loading spilled partitions: the sum of the partitions'
        lengths (``by_length``: a table with a range key) or the number of partitions."""
        if by_length:
            return sum(len(value) for value in self._hot.values()) + self._cold_items
        return len(self._hot) + self._cold

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, key: Any) -> Any:
        canon = _canon(key)
        hot = self._hot
        try:
            value = hot[canon]
        except KeyError:
            value = self._load(canon)
            if value is _ABSENT:
                value = {}  # defaultdict(dict)
                self._insert(canon, key, value)
            return value
        hot.move_to_end(canon)
        return value

    def __setitem__(self, key: Any, value: Any) -> None:
        canon = _canon(key)
        hot = self._hot
        if canon in hot:  # a dict keeps a replaced key's place and key object
            hot[canon] = value
            hot.move_to_end(canon)
            return
        found = self._take(canon, False)
        if found is None:
            self._insert(canon, key, value)
        else:
            stored, seq, _ = found
            hot[canon] = value
            self._meta[canon] = (stored, seq)
            self._grew()

    def __delitem__(self, key: Any) -> None:
        canon = _canon(key)
        if canon in self._hot:
            del self._hot[canon]
            del self._meta[canon]
        elif self._take(canon, False) is None:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        canon = _canon(key)
        if canon in self._hot:
            self._hot.move_to_end(canon)
            return True
        return self._load(canon) is not _ABSENT

    def __iter__(self) -> Iterator[Any]:
        self._load_all()
        entries = sorted(self._meta.values(), key=lambda entry: entry[1])
        return iter([key for key, _ in entries])

    def __len__(self) -> int:
        return len(self._hot) + self._cold

    def __repr__(self) -> str:
        return f"SpilledPartitions({len(self._hot)} in memory, {self._cold} on disk)"

    def get(self, key: Any, default: Any = None) -> Any:
        canon = _canon(key)
        hot = self._hot
        if canon in hot:
            hot.move_to_end(canon)
            return hot[canon]
        value = self._load(canon)
        return default if value is _ABSENT else value

    def pop(self, key: Any, default: Any = _ABSENT) -> Any:
        canon = _canon(key)
        if canon in self._hot:
            del self._meta[canon]
            return self._hot.pop(canon)
        found = self._take(canon, True)
        if found is not None:
            return found[2]
        if default is _ABSENT:
            raise KeyError(key)
        return default

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self[key] = default
        return default

    def popitem(self) -> tuple[Any, Any]:
        """The last inserted partition, removed (a dict's LIFO order)."""
        self._load_all()
        if not self._hot:
            raise KeyError("popitem(): dictionary is empty")
        canon = max(self._meta, key=lambda c: self._meta[c][1])
        key, _ = self._meta.pop(canon)
        return key, self._hot.pop(canon)

    def clear(self) -> None:
        self._hot.clear()
        self._meta.clear()
        if self._db is not None:
            self._db.execute("DELETE FROM p")
        self._cold = self._cold_items = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> SpilledPartitions:
        """A store of its own (moto's backups and point-in-time restores deep-copy tables): hot
        partitions deep-copied, spilled rows copied as they are."""
        import copy

        clone = SpilledPartitions()
        memo[id(self)] = clone
        for canon, value in self._hot.items():
            key, seq = self._meta[canon]
            clone._hot[canon] = copy.deepcopy(value, memo)
            clone._meta[canon] = (copy.deepcopy(key, memo), seq)
        clone._next = self._next
        if self._cold:
            rows = self._connection().execute("SELECT seq, h, n, key, value FROM p").fetchall()
            clone._connection().executemany(
                "INSERT INTO p (seq, h, n, key, value) VALUES (?, ?, ?, ?, ?)", rows
            )
            clone._cold, clone._cold_items = self._cold, self._cold_items
        clone._grew()
        return clone

    def __reduce__(self) -> tuple[Any, tuple[list[tuple[Any, Any]]]]:
        return _partitions_from_pairs, (list(self.items()),)


def _partitions_from_pairs(pairs: list[tuple[Any, Any]]) -> SpilledPartitions:
    """Unpickle a :class:`SpilledPartitions` (all of it hot, in its order)."""
    store = SpilledPartitions()
    for key, value in pairs:
        store[key] = value
    return store


def spilled_dynamodb_items(hot_partitions: int | None = None) -> None:
    """Keep at most ``hot_partitions`` partitions of each moto DynamoDB table in memory; the rest
    live pickled in a temporary SQLite file per table.

    Why: moto keeps every item of a table in memory as its own objects (about seven times the
    item's JSON), and the StateTable keeps a ledger record and an alerts record per job (AWS
    keeps them too, 7 to 30 days by TTL): about 1.4 KB per replayed event, for the whole replay
    of a long archive. What changes: each table created from now on (``Table.__init__``, and so
    also restored tables) stores its ``items`` in a :class:`SpilledPartitions`. What is bounded:
    the partitions (hash keys) in memory, per table; on disk, every spilled partition until the
    table goes (the file goes with its connection, when moto resets or the table is deleted).
    SQLite's own page cache adds at most its default 2 MB per table that has spilled.

    When: after each DynamoDB request moto answers (``DynamoHandler.call_action``, success or
    error, response already serialised), once no other DynamoDB request is being answered,
    every table that went over the limit writes its least recently touched partitions out until
    nine tenths of ``hot_partitions`` remain (:meth:`SpilledPartitions.evict`). Never during a
    request: moto holds ``Item`` objects and changes them in place (UpdateItem,
    TransactWriteItems), and a partition written out meanwhile would lose the write.
    A request may touch any number of partitions (a Scan touches all; they are written out again
    after it).

    Answers kept: every API answers as with moto's dict, since the store is that dict with the
    same matches (a ``DynamoType`` key by the ``(type, cast_value)`` its hash and ``==`` use),
    the same missing-key behaviour and the same iteration order;
    ``Table.__len__`` (DescribeTable's ItemCount) is answered from counts kept per partition
    instead of loading the spilled ones. A Query of a table (not an index) scans the whole
    table in moto: :func:`single_partition_queries` makes it read its own partition only, else
    every Query would load every spilled partition.

    ``hot_partitions`` (>= 0; None: :data:`HOT_PARTITIONS`, read now) is the limit from now on,
    for every table (read at each eviction): tests set a small one, and each ``EmbeddedAws``
    opened sets the default again. Idempotent; process-wide.

    Raises:
        ValueError: ``hot_partitions`` < 0.
    """
    limit = HOT_PARTITIONS if hot_partitions is None else hot_partitions
    if limit < 0:
        raise ValueError(f"hot_partitions must be >= 0, not {limit}")
    _spill.limit = limit
    import functools

    from moto.dynamodb import responses
    from moto.dynamodb.models import dynamo_type, table

    table_class: Any = table.Table
    if getattr(table_class, "_batchpilot_spilled_items", False):
        return
    _spill.attributes_class = dynamo_type.LimitedSizeDict
    _spill.dynamo_type = dynamo_type.DynamoType
    _spill.dispatch[dynamo_type.LimitedSizeDict] = _reduce_attributes
    original_init = table_class.__init__
    original_len = table_class.__len__

    @functools.wraps(original_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self.items = SpilledPartitions()

    def __len__(self: Any) -> int:
        items = self.items
        if type(items) is SpilledPartitions:
            return items.item_count(self.has_range_key)
        return int(original_len(self))

    handler: Any = responses.DynamoHandler
    original_call = handler.call_action

    @functools.wraps(original_call)
    def call_action(self: Any) -> Any:
        with _spill.lock:
            _spill.in_flight += 1
        try:
            return original_call(self)
        finally:
            with _spill.lock:
                _spill.in_flight -= 1
                idle = _spill.in_flight == 0
            if idle:
                _spill.evict_all()

    table_class.__init__ = __init__
    table_class.__len__ = __len__
    handler.call_action = call_action
    table_class._batchpilot_spilled_items = True


def single_partition_queries() -> None:
    """Make moto's DynamoDB Query of a table (not an index) read the partition of its hash key
    only.

    moto's ``Table.query`` builds ``all_items()`` (every item of the table, sorted by hash and
    range key) and keeps those whose hash key equals the query's: per Query, time in the whole
    table, and with :func:`spilled_dynamodb_items` a load of every spilled partition. The items
    kept are exactly those of ``items[hash_key]``, in the same order when sorted the same way, so
    for the query's duration ``all_items`` gives those (an instance attribute shadowing the
    method; ``items.get`` creates no partition). A Query of an index, and one without a hash
    key, still go through the whole table as in moto. Idempotent; process-wide.
    """
    from moto.dynamodb.models import dynamo_type, table

    table_class: Any = table.Table
    if getattr(table_class, "_batchpilot_single_partition_queries", False):
        return
    item_class = dynamo_type.Item
    original = table_class.query

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        # moto's backend passes hash_key .. index_name positionally (Table.query's order).
        hash_key = args[0] if args else kwargs.get("hash_key")
        index_name = args[7] if len(args) > 7 else kwargs.get("index_name")
        if index_name or hash_key is None:
            return original(self, *args, **kwargs)
        partition = self.items.get(hash_key)
        if isinstance(partition, dict):
            found = [item for item in partition.values() if isinstance(item, item_class)]
        elif isinstance(partition, item_class):
            found = [partition]
        else:
            found = []
        found = sorted(  # all_items()'s order
            (item for item in found if item.hash_key == hash_key),
            key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key,
        )
        self.all_items = lambda: found
        try:
            return original(self, *args, **kwargs)
        finally:
            del self.all_items

    table_class.query = query
    table_class._batchpilot_unpatched_query = original  # for tests that compare with moto's own
    table_class._batchpilot_single_partition_queries = True


DIRECT_DYNAMODB_ID = "batchpilot-direct-dynamodb"
"""How the ``unique_id`` of a :func:`direct_dynamodb_calls` handler on an event emitter begins."""

_BLOB_KEYS = (b'"B"', b'"BS"')  # how a JSON request body names a Binary (Set) AttributeValue


def direct_dynamodb_answer(
    model: Any, params: Mapping[str, Any], request_signer: Any = None, context: Any = None, **_: Any
) -> tuple[Any, dict[str, Any]] | None:
    """botocore ``before-call.dynamodb`` handler: moto's answer to a DynamoDB call, without the
    HTTP hop.

    botocore has validated and serialised the request (``params`` is its request dict: ``url``,
    ``method``, ``headers``, ``body``); moto's own ``DynamoHandler`` reads it and acts, and
    botocore's own JSON parser reads the answer (modeled error fields such as a
    ``ConditionalCheckFailedException``'s ``Item`` included; ``RetryAttempts`` 0). A body without a
    Binary AttributeValue is read with ``json.loads`` when the operation's input has no
    timestamp, double or other blob (:func:`_plain_json_input`; moto's JSON parser then changes
    nothing, because botocore's parameter validation, on by default, lets no ``null`` or unknown
    member through); any other body takes moto's parser, which decodes base64 and timestamps.

    Returns ``(http_response, parsed)`` as botocore's ``before-call`` contract asks, or None (the
    normal path) while moto is not answering (its stubber disabled, as the HTTP fault hooks do).
    An exception moto raises (not an AWS error answer) is announced as ``after-call-error`` on the
    client's emitter, as botocore does on the HTTP path, and propagates. ``after-call`` handlers
    run as on the HTTP path.

    What the HTTP path does and this one skips:
    - the ``before-call`` handlers after this one (botocore's recursion-detection and API-version
      headers), and the ``request-created``, ``before-send``, ``before-parse``,
      ``response-received`` and ``needs-retry`` events: request preparation, signing (moto then
      sees its default access key; the embedded AWS sends DynamoDB requests unsigned anyway, and
      ``MOTO_ACCOUNT_ID`` names the account), the HTTP fault hooks and the retry handler (botocore
      would retry a throttling or 5xx answer, which moto's DynamoDB never gives);
    - the response's CRC32 check, botocore's history recorder and the ``retries`` and
      ``timestamp`` entries it adds to the request ``context``;
    - moto's URL routing, request recorder and passthrough and service-whitelist checks;
    - the session's ``response_parser_factory``: the parser is botocore's default for the protocol.
    """
    from moto.core.models import botocore_stubber

    if not botocore_stubber.enabled:
        return None
    return _announced(model, request_signer, context, lambda: _direct_dynamodb_call(model, params))


def _announced(model: Any, request_signer: Any, context: Any, call: Callable[[], _T]) -> _T:
    """``call()``; an exception it raises is first announced as ``after-call-error`` on the
    client's emitter, as botocore's ``_make_request`` announces an exception raised while sending
    (moto's own NotImplementedError or ValueError, say): the API journal hears of it."""
    try:
        return call()
    except Exception as exc:
        emitter = getattr(request_signer, "_event_emitter", None)
        if emitter is not None:
            service_id = model.service_model.service_id.hyphenize()
            emitter.emit(f"after-call-error.{service_id}.{model.name}", exception=exc, context=context)
        raise


def _prepared_request(params: Mapping[str, Any]) -> Any:
    """The ``AWSPreparedRequest`` botocore would send for its request dict ``params`` (header
    values as text, as moto's stubber makes them before answering)."""
    from botocore.awsrequest import AWSPreparedRequest, HTTPHeaders

    headers = HTTPHeaders()
    for name, value in params["headers"].items():
        headers[name] = value.decode("utf-8") if isinstance(value, bytes) else value
    return AWSPreparedRequest(params["method"], params["url"], headers, params.get("body"), False)


def _direct_dynamodb_call(model: Any, params: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    from moto.dynamodb.responses import DynamoHandler
    from werkzeug.exceptions import HTTPException  # what moto's errors derive from

    request = _prepared_request(params)
    body = request.body
    handler = DynamoHandler()
    try:
        handler.automated_parameter_parsing = False  # the parameters are read below
        handler.setup_class(request, request.url, request.headers)
        if (
            isinstance(body, bytes)
            and _plain_json_input(model)
            and not any(key in body for key in _BLOB_KEYS)
        ):
            handler.params = json.loads(body) if body else {}
        else:
            handler.parse_parameters(request)
        handler.automated_parameter_parsing = True  # as moto's handler is, for its _get_param
        status, response_headers, response_body = handler.call_action()
    except HTTPException as exc:  # as moto's stubber answers one
        status, response_headers, response_body = exc.code, exc.get_headers(), exc.get_body()
    return _parsed_answer(model, request.url, int(status), response_headers, response_body)


_PLAIN_JSON_INPUTS: dict[tuple[str, str], bool] = {}


def _plain_json_input(model: Any) -> bool:
    """Whether moto's JSON parser gives ``json.loads``' value for every request of ``model`` whose
    body holds no ``"B"``/``"BS"`` token: its input shape has no timestamp, float or double (the
    parser converts those: ExportTableToPointInTime, ListBackups, RestoreTableToPointInTime, the
    auto-scaling updates), and its only blobs are an AttributeValue's ``B`` and ``BS``. Kept per
    operation."""
    key = (model.service_model.service_name, model.name)
    if key not in _PLAIN_JSON_INPUTS:
        _PLAIN_JSON_INPUTS[key] = _plain_shape(model.input_shape, frozenset(), None)
    return _PLAIN_JSON_INPUTS[key]


def _plain_shape(shape: Any, seen: frozenset[str], member: str | None) -> bool:
    if shape is None:
        return True
    kind = shape.type_name
    if kind in ("timestamp", "float", "double"):
        return False
    if kind == "blob":
        return member in ("B", "BS")  # BS is a list of blobs: its member arrives here as "BS"
    if shape.name in seen:  # AttributeValue is recursive (M, L)
        return True
    seen = seen | {shape.name}
    if kind == "structure":
        return all(_plain_shape(value, seen, name) for name, value in shape.members.items())
    if kind == "list":
        return _plain_shape(shape.member, seen, member)
    if kind == "map":
        return _plain_shape(shape.key, seen, None) and _plain_shape(shape.value, seen, None)
    return True


def _parsed_answer(
    model: Any, url: str, status: int, headers: Any, body: str | bytes
) -> tuple[Any, dict[str, Any]]:
    """``(AWSResponse, parsed)`` for an HTTP answer to a call of ``model``, as botocore's endpoint
    builds them (``Endpoint._do_get_response`` and ``_send_request`` in botocore 1.43), with the
    parser of the service's protocol."""
    from botocore.awsrequest import AWSResponse
    from botocore.endpoint import Endpoint, convert_to_response_dict
    from moto.core.botocore_stubber import MockRawResponse

    http_response = AWSResponse(url, status, headers, MockRawResponse(body))
    response_dict = convert_to_response_dict(http_response, model)
    parser = _parser(model.service_model.resolved_protocol)
    parsed: dict[str, Any] = parser.parse(response_dict, model.output_shape)
    if status >= 300:
        # botocore's second pass for modeled error fields; the method uses no endpoint state.
        cast(Any, Endpoint)._add_modeled_error_fields(None, response_dict, parsed, model, parser)
    if "ResponseMetadata" in parsed:
        parsed["ResponseMetadata"]["RetryAttempts"] = 0
    return http_response, parsed


@functools.cache
def _parser(protocol: str) -> Any:
    from botocore.parsers import create_parser

    return create_parser(protocol)


def direct_dynamodb_calls(emitters: Iterable[Any]) -> Callable[[], None]:
    """Answer the DynamoDB calls of every client made from ``emitters`` (boto3 sessions' event
    emitters; a client copies its session's when it is created, and keeps the handler after the
    undo) with :func:`direct_dynamodb_answer`, registered first on ``before-call.dynamodb``
    (handlers on ``before-call.dynamodb.<Operation>`` run before it; once it answers, no later
    ``before-call`` handler runs). Returns the undo, which removes this registration only (each
    has its own ``unique_id``).

    Scripted HTTP faults (``batchpilot_local.testing.faults``) sit at ``before-send``, which this
    path skips: the fault tests do not turn it on, the replay does.
    """
    return _register_first(emitters, ["dynamodb"], direct_dynamodb_answer, DIRECT_DYNAMODB_ID)


_REGISTRATIONS = itertools.count(1)


def _register_first(
    emitters: Iterable[Any], service_ids: Sequence[str], handler: Callable[..., Any], prefix: str
) -> Callable[[], None]:
    """``handler`` registered first on ``before-call.<service id>`` of each emitter, under a
    ``unique_id`` of its own (``<prefix>-<n>-<service id>``); returns the undo."""
    registered = list(emitters)
    unique = f"{prefix}-{next(_REGISTRATIONS)}"
    for emitter in registered:
        for service_id in service_ids:
            emitter.register_first(f"before-call.{service_id}", handler, unique_id=f"{unique}-{service_id}")

    def undo() -> None:
        for emitter in registered:
            for service_id in service_ids:
                emitter.unregister(f"before-call.{service_id}", unique_id=f"{unique}-{service_id}")

    return undo


DIRECT_READS_ID = "batchpilot-direct-emulator-reads"
"""How the ``unique_id`` of a :func:`direct_emulator_reads` handler on an event emitter begins."""

READ_OPERATIONS = ("Describe", "Get", "List")
"""How the names of the read operations :func:`direct_emulator_reads` answers begin (none is
throttled by the emulator: only SubmitServiceJob is)."""


def direct_emulator_reads(emitters: Iterable[Any], route: Handler) -> Callable[[], None]:
    """Answer the Batch and SageMaker read calls (:data:`READ_OPERATIONS`) that ``route`` (the
    emulator's :class:`~batchpilot_local.emulator.overlay.Overlay.route`) answers, at botocore's
    ``before-call`` of every client made from ``emitters``, without the HTTP hop; what ``route``
    leaves to moto, and every write, takes the HTTP path. Returns the undo.

    As :func:`direct_dynamodb_answer`: botocore validates and serialises the request and its
    parser (rest-json for Batch, JSON for SageMaker) reads the answer; an exception is announced as
    ``after-call-error``; nothing is answered while moto's stubber is disabled. Writes stay on the
    HTTP path because botocore retries a throttled SubmitServiceJob there. A read ``route``
    leaves to moto is routed again on the HTTP path, so ``route`` must not act when it answers
    None (the emulator's does not). As there, a client keeps the handler (and so this ``route``)
    after the undo, and each registration has its own ``unique_id``.
    """
    from moto.core.models import botocore_stubber

    def answer(
        model: Any, params: Mapping[str, Any], request_signer: Any = None, context: Any = None, **_: Any
    ) -> tuple[Any, dict[str, Any]] | None:
        if not botocore_stubber.enabled or not model.name.startswith(READ_OPERATIONS):
            return None

        def call() -> tuple[Any, dict[str, Any]] | None:
            request = _prepared_request(params)
            response = route(request)
            if response is None:
                return None  # moto's: it answers on the HTTP path
            status, headers, body = response
            return _parsed_answer(model, request.url, int(status), headers, body)

        return _announced(model, request_signer, context, call)

    return _register_first(emitters, ["batch", "sagemaker"], answer, DIRECT_READS_ID)
