"""An AWS account that lives in this process (moto), for the replay runner and the tests.

:class:`EmbeddedAws` is a context manager. While it is open:

- ``os.environ`` holds fake credentials and region (``AWS_ACCESS_KEY_ID=testing``,
  ``AWS_DEFAULT_REGION=us-east-1``, ...); every variable that could point boto3 at a real
  account (profiles, config and credential files, custom endpoints, session tokens) is removed;
- ``moto.mock_aws()`` answers every boto3/botocore call in the process, and the emulator
  (:mod:`batchpilot_local.emulator`) what moto lacks of Batch and SageMaker: clients of those two
  created while open talk to the emulator's endpoint (``AWS_ENDPOINT_URL_BATCH`` /
  ``_SAGEMAKER``), which answers for the sessions the code under test uses (the adapters'
  ``batchpilot.io.clients.session()``, boto3's default session, :meth:`EmbeddedAws.client`'s);
- outbound network connections are refused, except to loopback addresses (local endpoints such as
  a Slack sink): even a library that bypassed moto could not reach real AWS.

Everything is restored on exit. :func:`observing` lets a tool watch every API call the code under
test makes in each embedded AWS opened meanwhile (the IAM conformance test records them through
it). It delivers events the way an SQS event source mapping does:
:meth:`EmbeddedAws.receive_as_lambda_event` turns queued messages into the Lambda SQS event shape,
and :meth:`EmbeddedAws.delete_processed` deletes the records the handler did not report as failed.
:func:`create_tables` creates DynamoDB tables from the template's specs.
"""

from __future__ import annotations

import copy
import ipaddress
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Protocol

import boto3
import botocore
import botocore.session
from moto import mock_aws

from batchpilot_local import world as _world
from batchpilot_local.emulator import EmbeddedBatch, EmbeddedTraining, Overlay, moto_fixes
from batchpilot_local.emulator.direct import direct_calls
from batchpilot_local.template import ACCOUNT_ID, REGION
from batchpilot_local.world import ApiJournal, JournalEntry, WorldError

__all__ = [
    "ApiObserver",
    "EmbeddedAws",
    "NetworkBlockedError",
    "WorldError",
    "create_tables",
    "forget_model_instances",
    "observing",
]

_FAKE_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "MOTO_ACCOUNT_ID": ACCOUNT_ID,  # moto answers for this account (the docs' and events' one)
}
# Variables that could make boto3 use a real account or endpoint: removed while open.
_REMOVED_ENV = (
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CREDENTIAL_EXPIRATION",
    "AWS_ENDPOINT_URL",
)

WORLD_KEYS: frozenset[str] = _world.WORLD_KEYS
"""Keys :meth:`EmbeddedAws.seed` understands (schema and seeding: :mod:`batchpilot_local.world`)."""


def create_tables(dynamodb: Any, tables: Mapping[str, Mapping[str, Any]]) -> None:
    """Create DynamoDB tables (on-demand billing) from the template's specs, unless they exist.

    Args:
        dynamodb: a DynamoDB client of a moto-backed account (e.g. ``aws.client("dynamodb")``).
        tables: physical name → spec as :attr:`AppTemplate.tables
            <batchpilot_local.template.AppTemplate>` gives it (``AttributeDefinitions``,
            ``KeySchema``, ``GlobalSecondaryIndexes``, ``TimeToLiveAttribute``): the template's own
            tables, or one of them under another name (``{name: template.tables[STATE_TABLE]}``).

    A spec without ``KeySchema`` (a table the template leaves to CloudFormation defaults) creates
    nothing; TTL is turned on when the spec names its attribute. The specs are not modified.
    """
    existing = set(dynamodb.list_tables().get("TableNames", []))
    for name, spec in tables.items():
        if name in existing or "KeySchema" not in spec:
            continue
        args = {k: copy.deepcopy(v) for k, v in spec.items() if k != "TimeToLiveAttribute"}
        for index in args.get("GlobalSecondaryIndexes", []):
            index.pop("ProvisionedThroughput", None)
        dynamodb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST", **args)
        if "TimeToLiveAttribute" in spec:
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": spec["TimeToLiveAttribute"]},
            )


class ApiObserver(Protocol):
    """Something that watches API calls through botocore's event hooks, installed the way the API
    journal is (:class:`~batchpilot_local.world.ApiJournal` is one;
    :class:`batchpilot_local.iam.calls.CallRecorder` another)."""

    def install(self, emitters: Iterable[Any]) -> None:
        """Register event handlers on each botocore event emitter (a session's ``events``)."""

    def uninstall(self) -> None:
        """Unregister them from every emitter."""


_OBSERVERS: list[ApiObserver] = []


@contextmanager
def observing(observer: ApiObserver) -> Iterator[ApiObserver]:
    """While the ``with`` block runs, every :class:`EmbeddedAws` opened installs ``observer`` on the
    emitters it journals (the adapters' session, :func:`batchpilot.io.clients.session`, and
    boto3's default session) and uninstalls it on close; clients created there are observed.
    Yields ``observer``. Blocks may nest (each adds one observer)."""
    _OBSERVERS.append(observer)
    try:
        yield observer
    finally:
        _OBSERVERS.remove(observer)


class NetworkBlockedError(ConnectionRefusedError):
    """Code running inside :class:`EmbeddedAws` tried to open a non-loopback network connection."""


def _is_loopback(address: Any) -> bool:
    if isinstance(address, str | bytes):  # AF_UNIX path
        return True
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode("ascii", "replace")
    if not isinstance(host, str):
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


@contextmanager
def _network_guard() -> Iterator[None]:
    """Refuse every non-loopback ``connect``/``connect_ex`` on Python sockets while active."""
    cls = socket.socket
    original_connect = cls.connect
    original_connect_ex = cls.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"batchpilot replay: network access to {address!r} is blocked")
        original_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            raise NetworkBlockedError(f"batchpilot replay: network access to {address!r} is blocked")
        return original_connect_ex(self, address)

    cls.connect = connect  # type: ignore[method-assign,assignment]
    cls.connect_ex = connect_ex  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        cls.connect = original_connect  # type: ignore[method-assign]
        cls.connect_ex = original_connect_ex  # type: ignore[method-assign]


class EmbeddedAws:
    """A moto-backed AWS account in this process (account ``111122223333``, region ``us-east-1``).

    Use as a context manager; nothing works before ``__enter__``::

        with EmbeddedAws() as aws:
            url = aws.create_queue("MetricsQueue")
            aws.send(url, json_text)
            event = aws.receive_as_lambda_event(url)

    Not re-entrant; not thread-safe. Raises ``RuntimeError`` when used while closed.

    ``direct_calls=True`` answers DynamoDB calls, and the emulator's Batch and SageMaker reads, at
    botocore's ``before-call`` without the HTTP hop (:func:`~batchpilot_local.emulator.direct.direct_calls`:
    botocore still validates and serialises each request and parses each answer; moto and the
    emulator still act): what the replay uses, for speed. It skips ``before-send`` hooks, so the
    HTTP fault hooks (:mod:`batchpilot_local.testing.faults`) need the default, False.
    """

    def __init__(self, region: str = REGION, *, direct_calls: bool = False) -> None:
        self.region = region
        self.direct_calls = direct_calls
        self._undo_direct: list[Callable[[], None]] = []
        self._sqs_backend: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._mock: Any = None
        self._guard: Any = None
        self._session: boto3.Session | None = None
        self._clients: dict[str, Any] = {}
        self._queues: dict[str, str] = {}
        self.account_id = ACCOUNT_ID
        self.overlay = Overlay()  # Batch service jobs and SageMaker training jobs (moto lacks them)
        self._journal = ApiJournal()
        self._observers: list[ApiObserver] = []  # those of observing() installed by this open
        self._unsigned: list[Any] = []  # event emitters whose requests go unsigned
        self._default_session_created = False
        self._loader: Any = None

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> EmbeddedAws:
        if self._mock is not None:
            raise RuntimeError("EmbeddedAws is already open")
        for name in (
            *_FAKE_ENV,
            *_REMOVED_ENV,
            *(k for k in os.environ if k.startswith("AWS_ENDPOINT_URL_")),
        ):
            self._saved_env.setdefault(name, os.environ.get(name))
        try:
            self._guard = _network_guard()
            self._guard.__enter__()
            # moto leaves the emulator's endpoint alone (its passthrough setting): see emulator.overlay.
            config: Any = {"batch": {"use_docker": False}, "core": self.overlay.moto_config()}
            self._mock = mock_aws(config=config)
            self._mock.start()
            moto_fixes.install()  # moto's own inefficiencies, fixed for the moto it was written for
            # After moto's start: it patches os.environ with credentials of its own.
            for name in list(self._saved_env):
                os.environ.pop(name, None)
            os.environ.update(_FAKE_ENV)
            self._session = boto3.Session(
                aws_access_key_id="testing",
                aws_secret_access_key="testing",  # noqa: S106 - moto's fake credentials
                region_name=self.region,
                botocore_session=self._botocore_session(),
            )
            self._install_journal()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop moto, drop its data and restore the environment and the network. Idempotent."""
        try:
            if self._mock is not None:
                self._mock.stop()
        finally:
            self.overlay.uninstall()
            self.overlay = Overlay()
            self._journal.uninstall()
            for observer in self._observers:
                observer.uninstall()
            self._observers = []
            for emitter in self._unsigned:
                for service_id in _UNSIGNED_SERVICES:
                    unique_id = f"{_UNSIGNED_ID}-{service_id}"
                    emitter.unregister(f"choose-signer.{service_id}", unique_id=unique_id)
            for undo in self._undo_direct:
                undo()
            self._undo_direct = []
            self._unsigned = []
            if self._default_session_created:
                boto3.DEFAULT_SESSION = None
                self._default_session_created = False
            self._mock = None
            self._session = None
            self._clients.clear()
            self._queues.clear()
            self._sqs_backend = None
            if self._guard is not None:
                self._guard.__exit__(None, None, None)
                self._guard = None
            for name, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._saved_env.clear()

    def _botocore_session(self) -> botocore.session.Session:
        """A new botocore session with this object's one data loader (public
        ``register_component``): this object's session and the default one it creates read and
        hold each service model (DynamoDB, SageMaker, ...) once for both."""
        session = botocore.session.Session()
        if self._loader is None:
            self._loader = session.get_component("data_loader")
        else:
            session.register_component("data_loader", self._loader)
        return session

    def client(self, service: str) -> Any:
        """A boto3 client for ``service`` bound to the embedded account (cached per service)."""
        if self._session is None:
            raise RuntimeError("EmbeddedAws is not open")
        if service not in self._clients:
            self._clients[service] = self._session.client(service, region_name=self.region)  # type: ignore[call-overload]
        return self._clients[service]

    def _install_journal(self) -> None:
        """Record the API calls made through ``batchpilot.io.clients.session()`` and boto3's
        default session (created here when missing, dropped again on close); put the emulator in
        front of moto for those sessions and this object's own; send the requests of the services
        that moto checks no signature on unsigned."""
        from batchpilot.io import clients as adapters_aws

        self._journal = ApiJournal()  # a fresh journal per open
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session(botocore_session=self._botocore_session())
            self._default_session_created = True
        default_session = boto3.DEFAULT_SESSION
        assert default_session is not None
        emitters = [adapters_aws.session().events, default_session.events]
        self._journal.install(list(emitters))
        for observer in _OBSERVERS:
            observer.install(list(emitters))
            self._observers.append(observer)
        if self._session is not None:
            emitters.append(self._session.events)
        self.overlay.install(emitters)
        # moto checks no signature on these services (their account is MOTO_ACCOUNT_ID, their
        # region the endpoint's), so their requests go unsigned: SigV4 was about a fifth of each
        # embedded call's botocore time. S3 stays signed: moto treats an unsigned S3 request as
        # anonymous and denies it; Batch and SageMaker too: the emulator reads their region from
        # the signature (their endpoint, the emulator's, names none).
        self._unsigned = emitters
        for emitter in self._unsigned:
            for service_id in _UNSIGNED_SERVICES:
                emitter.register_first(
                    f"choose-signer.{service_id}", _unsigned, unique_id=f"{_UNSIGNED_ID}-{service_id}"
                )
        if self.direct_calls:  # each undo kept as soon as it exists: close() runs them all
            self._undo_direct.append(direct_calls(self._unsigned, self.overlay))

    # ------------------------------------------------------------------ embedded services
    @property
    def batch(self) -> EmbeddedBatch:
        """The embedded Batch of this account and region (service jobs, queues, container jobs)."""
        if self._session is None:
            raise RuntimeError("EmbeddedAws is not open")
        return self.overlay.batch(self.account_id, self.region)

    @property
    def training(self) -> EmbeddedTraining:
        """The embedded SageMaker training jobs of this account and region."""
        if self._session is None:
            raise RuntimeError("EmbeddedAws is not open")
        return self.overlay.training(self.account_id, self.region)

    def set_submit_rate(self, limit: int | None) -> None:
        """SubmitServiceJob calls allowed per second (AWS: 5, the default); None turns it off."""
        self.overlay.set_submit_rate(limit)

    # ------------------------------------------------------------------ journal
    @property
    def journal(self) -> list[JournalEntry]:
        """Every API call the code under test made while open (boto3 clients created after open
        from ``batchpilot.io.clients.session()`` or boto3's default session), oldest first.
        Calls through :meth:`client` (the replay's own) are not recorded."""
        return self._journal.entries

    def drain_journal(self) -> list[JournalEntry]:
        """The journal so far, emptied."""
        return self._journal.drain()

    # ------------------------------------------------------------------ world
    @staticmethod
    def check_world(world: object) -> None:
        """Validate a scenario's ``world`` without creating anything.

        Raises:
            WorldError: ``world`` is not an object, has keys that :data:`WORLD_KEYS` lacks, or a
                malformed value (the message names the field).
        """
        _world.check_world(world)

    def seed(self, world: Mapping[str, Any]) -> None:
        """Create the resources a scenario's ``world`` describes (see :mod:`batchpilot_local.world`).

        May be called several times: worlds add up (an item with an existing id replaces it).

        Raises:
            WorldError: see :meth:`check_world`; also a reference to something that does not exist.
            RuntimeError: the embedded AWS is not open.
        """
        if self._session is None:
            raise RuntimeError("EmbeddedAws is not open")
        _world.seed(self, world)

    def set_world(self, world: Mapping[str, Any]) -> None:
        """Move the world on (a clock tick): each job list ``world`` gives (``service_jobs``,
        ``jobs``, ``training_jobs``) replaces the whole set of its kind; service environments,
        queues and job definitions it gives are created or updated; checkpoint prefixes it gives
        hold exactly its objects. Keys it leaves out are untouched.

        Raises:
            WorldError, RuntimeError: as :meth:`seed`.
        """
        if self._session is None:
            raise RuntimeError("EmbeddedAws is not open")
        _world.seed(self, world, replace=True)

    # ------------------------------------------------------------------ SQS
    def create_queue(self, name: str, attributes: Mapping[str, str] | None = None) -> str:
        """Create (or return) the standard SQS queue ``name`` with the given SQS attributes (e.g.
        ``{"VisibilityTimeout": "60"}``); returns its URL."""
        if name not in self._queues:
            response = self.client("sqs").create_queue(QueueName=name, Attributes=dict(attributes or {}))
            self._queues[name] = response["QueueUrl"]
        return self._queues[name]

    def queue_url(self, name: str) -> str:
        """URL of a queue made by :meth:`create_queue`. Raises ``KeyError`` for an unknown queue."""
        return self._queues[name]

    def queue_arn(self, name: str) -> str:
        """ARN of the queue ``name`` (``arn:aws:sqs:us-east-1:111122223333:<name>``)."""
        return f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{name}"

    # The methods below play Lambda's SQS event source mapping (an AWS-internal poller, not code
    # under test), so they call moto's SQS backend directly: the same queue semantics (visibility,
    # receive counts, redrive to the dead-letter queue) without a botocore round trip and moto's
    # response rendering per message, which cost most of a replay's time.
    def _sqs(self) -> Any:
        # Looked up once per open: moto's BackendDict lookup is not free and this runs for every
        # send, receive and delete (moto resets its backends only when the mock stops).
        if self._sqs_backend is None:
            from moto.sqs.models import sqs_backends

            self._sqs_backend = sqs_backends[ACCOUNT_ID][self.region]
        return self._sqs_backend

    def send(self, queue: str, body: str) -> str:
        """Send one message (``body`` as is) to the named queue; returns its MessageId.

        Raises:
            KeyError: the queue was not made by :meth:`create_queue`.
        """
        self.queue_url(queue)
        return str(self._sqs().send_message(queue, body).id)

    def has_messages(self, queue: str) -> bool:
        """Whether the named queue holds a message that a receive would return now (visible,
        not delayed): lets a poller skip an empty queue without a receive."""
        return bool(self._sqs().get_queue(queue).messages)

    def receive_as_lambda_event(self, queue: str, max_records: int = 10) -> dict[str, Any]:
        """Receive up to ``max_records`` (1-10) messages and wrap them as Lambda's SQS event.

        Messages that reached the queue's ``maxReceiveCount`` move to its dead-letter queue
        instead, as SQS does. The queue's own VisibilityTimeout applies.

        Returns:
            ``{"Records": [{"messageId", "receiptHandle", "body", "attributes": {
            "ApproximateReceiveCount", "SentTimestamp", "SenderId",
            "ApproximateFirstReceiveTimestamp"}, "messageAttributes", "md5OfBody",
            "eventSource": "aws:sqs", "eventSourceARN", "awsRegion"}]}``; ``Records`` is empty when
            the queue is.
        """
        self.queue_url(queue)
        backend = self._sqs()
        timeout = int(backend.get_queue(queue).visibility_timeout)
        messages = backend.receive_message(queue, max(1, min(10, max_records)), 0, timeout, ["All"])
        arn = self.queue_arn(queue)
        return {"Records": [self._record(message, arn) for message in messages]}

    def _record(self, message: Any, arn: str) -> dict[str, Any]:
        """One moto ``Message`` as a record of Lambda's SQS event."""
        return {
            "messageId": message.id,
            "receiptHandle": message.receipt_handle,
            "body": message.body,
            "attributes": {
                "ApproximateReceiveCount": str(message.approximate_receive_count),
                "SentTimestamp": str(message.sent_timestamp),
                "SenderId": str(message.sender_id),
                "ApproximateFirstReceiveTimestamp": str(message.approximate_first_receive_timestamp),
            },
            "messageAttributes": {
                name: _lambda_message_attribute(value)
                for name, value in (message.message_attributes or {}).items()
            },
            "md5OfBody": message.body_md5,
            "eventSource": "aws:sqs",
            "eventSourceARN": arn,
            "awsRegion": self.region,
        }

    def delete_processed(self, queue: str, records: Sequence[Mapping[str, Any]], failed_ids: set[str]) -> int:
        """Delete the records whose ``messageId`` is not in ``failed_ids`` (what Lambda does after
        a partial batch response); returns how many were deleted."""
        self.queue_url(queue)
        backend = self._sqs()
        deleted = 0
        for record in records:
            if record["messageId"] not in failed_ids:
                backend.delete_message(queue, record["receiptHandle"])
                deleted += 1
        forget_model_instances()
        return deleted

    def approximate_depth(self, queue: str) -> int:
        """``ApproximateNumberOfMessages`` + ``...NotVisible`` of the named queue."""
        attrs = self.client("sqs").get_queue_attributes(
            QueueUrl=self.queue_url(queue),
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])


_UNSIGNED_ID = "batchpilot-embedded-unsigned"
_UNSIGNED_SERVICES = ("dynamodb", "sqs", "sns", "eventbridge")
"""botocore service ids (hyphenated) whose requests to the embedded AWS go unsigned."""


def _unsigned(**_: Any) -> Any:
    """``choose-signer`` handler: no signature (``botocore.UNSIGNED``)."""
    return botocore.UNSIGNED


def forget_model_instances() -> None:
    """Empty moto's registry of the model objects it made (``BaseModel.instances_tracked``: every
    SQS message and DynamoDB item version moto ever made, kept for its server's dashboard, which
    the embedded AWS does not run) with moto's own ``reset_model_data``: the objects nothing else
    holds are then freed, and a replay's memory stays flat in its events. Called after each batch
    (:meth:`EmbeddedAws.delete_processed`); what moto's backends hold is untouched."""
    from moto.core.model_instances import reset_model_data

    reset_model_data()


def _lambda_message_attribute(value: Mapping[str, Any]) -> dict[str, Any]:
    """SQS API ``{"StringValue", "DataType", ...}`` → Lambda's ``{"stringValue", "dataType", ...}``."""
    out: dict[str, Any] = {
        "stringListValues": list(value.get("StringListValues", [])),
        "binaryListValues": list(value.get("BinaryListValues", [])),
        "dataType": value.get("DataType", "String"),
    }
    if "StringValue" in value:
        out["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        import base64

        raw = value["BinaryValue"]
        out["binaryValue"] = base64.b64encode(raw).decode("ascii") if isinstance(raw, bytes) else raw
    return out
