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
calls every handler, so moto would answer (and act on) the same request too.

Everything else the emulator needs from moto is public: its backend registries (read only), its
response base class (account and region of a request) and its paginator.

The other functions here change no answer, only what moto (and botocore, for the two marked)
costs to give it: a replay of a job event archive spends most of its time in the embedded AWS,
so they remove work repeated on every call:

- DynamoDB: :func:`cheap_transaction_rollback`, :func:`cheap_expression_traversal`,
  :func:`cached_update_expressions` (one parse per text, cheap copies of the tree),
  :func:`cached_condition_tokens`, :func:`single_item_size_check`;
- SQS: :func:`cheap_sqs_bookkeeping`, :func:`cheap_sqs_clock`, :func:`shallow_received_messages`,
  :func:`cached_name_conversion`;
- every request: :func:`cached_method_names`, :func:`light_json_requests`, and botocore's
  :func:`cached_user_agent`;
- EventBridge: :func:`matches_each` asks moto's matcher with the event prepared once, and
  :func:`cached_event_input_paths` parses a target's input paths once;
- memory: :func:`untracked_model_instances` lets moto's objects go once nothing uses them.

``tests/integration/test_emulator_patches.py``, ``tests/integration/test_transaction_rollback.py``
and the emulator's own tests check that the answers stay the same; ``benchmarks/bench_replay.py``
measures what they save.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from batchpilot_local.emulator.core import Response

__all__ = [
    "Handler",
    "cached_condition_tokens",
    "cached_event_input_paths",
    "cached_method_names",
    "cached_name_conversion",
    "cached_update_expressions",
    "cached_user_agent",
    "cheap_expression_traversal",
    "cheap_sqs_bookkeeping",
    "cheap_sqs_clock",
    "cheap_transaction_rollback",
    "install",
    "installed",
    "light_json_requests",
    "matches_each",
    "shallow_received_messages",
    "single_item_size_check",
    "uninstall",
    "untracked_model_instances",
]

Handler = Callable[[Any], Response | None]

_UNKNOWN = object()  # a cache miss (None is a cached answer)
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
      hexadecimal digits (128 random bits) from one ``secrets.token_hex`` call. Receipt handles
      are opaque: only their uniqueness matters. moto keeps every deleted message's handles
      (so a second delete of one succeeds, as in SQS), so a shorter handle is also a third of the
      memory a replay keeps per message.

    Idempotent; process-wide.
    """
    import secrets

    from moto.core.utils import unix_time
    from moto.sqs import models

    backend: Any = models.SQSBackend
    if getattr(backend, "_batchpilot_cheap_bookkeeping", False):
        return

    def is_message_valid_based_on_retention_period(self: Any, queue_name: str, message: Any) -> bool:
        retention = int(self.get_queue(queue_name).message_retention_period)
        return bool(retention + message.sent_timestamp / 1000 > unix_time())

    def generate_receipt_handle() -> str:
        return secrets.token_hex(16)

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
