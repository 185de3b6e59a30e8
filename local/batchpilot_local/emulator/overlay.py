"""The emulator as one object: the backends of every account and region, the clock they share,
the SubmitServiceJob rate, and how it stands in front of moto.

How, through documented seams only:

- **its own endpoint.** While installed, ``AWS_ENDPOINT_URL_BATCH`` and
  ``AWS_ENDPOINT_URL_SAGEMAKER`` (botocore's service-specific endpoint settings) point the Batch
  and SageMaker clients created from then on at the emulator's endpoint
  (``http://127.0.0.1:<port>/embedded-aws/<service>``, :mod:`.routing`);
- **moto leaves that endpoint alone**: :meth:`Overlay.moto_config` is moto's ``passthrough``
  configuration (moto's "Configuration Options" page) for those URLs, given to ``mock_aws``;
- **botocore's ``before-send`` event** (botocore's "Events" page: a handler may return the
  response that fulfils the request): :meth:`Overlay.before_send`, registered on the event
  emitters of the sessions the code under test uses (:meth:`Overlay.install`), answers their
  requests to that endpoint in process; a client of any other session reaches the same answers
  over HTTP, on the loopback server that listens at that endpoint (:mod:`.endpoint`);
- **the answer** (:meth:`Overlay.answer`): what the emulator serves (:func:`~.routing.route`) it
  answers itself; everything else (compute environments, job definitions, SageMaker models, ...)
  it hands to moto's own ``before-send`` handler (``moto.core.models.botocore_stubber``) as the
  same request sent to AWS's endpoint, so moto answers and acts once, as without the emulator.

Requests are serialised, validated, signed (the region an emulated request reads is the one it
is signed for), retried and parsed by botocore as against AWS. While moto's stubber is off
(``botocore_stubber.enabled``, which the HTTP fault hooks turn off for a request they answer
themselves), the emulator answers no ``before-send`` either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any, ClassVar

from batchpilot_local.emulator.batch.models import EmbeddedBatch, Throttle
from batchpilot_local.emulator.batch.utils import SUBMIT_SERVICE_JOB_RATE
from batchpilot_local.emulator.core import Clock, Response, http_response
from batchpilot_local.emulator.endpoint import LoopbackEndpoint
from batchpilot_local.emulator.routing import (
    ENDPOINT_PATTERN,
    SERVICES,
    Identity,
    aws_url,
    endpoints,
    operation_of,
    request_identity,
    route,
    service_of,
)
from batchpilot_local.emulator.sagemaker.models import EmbeddedTraining

__all__ = ["ENDPOINT_ENV", "Overlay"]

ENDPOINT_ENV = {service_id: f"AWS_ENDPOINT_URL_{service_id.upper()}" for service_id in SERVICES}
"""botocore service id → the environment variable that gives its clients an endpoint URL."""

_UNIQUE_ID = "batchpilot-emulator-before-send"


class Overlay:
    """The emulated Batch and SageMaker training jobs of every account and region, in front of
    moto while installed (:meth:`install` / :meth:`uninstall`; one at a time in a process).

    Backends are created per (account, region) on first use. ``clock`` (epoch seconds, may be
    replaced at any time, e.g. by a fake clock) stamps every time they record. ``submit_rate`` is
    the SubmitServiceJob limit per second per account (None: off); change it later with
    :meth:`set_submit_rate`. ``region`` is the region of a request that carries no signature.
    """

    _active: ClassVar[Overlay | None] = None

    def __init__(
        self,
        clock: Clock = time.time,
        submit_rate: int | None = SUBMIT_SERVICE_JOB_RATE,
        region: str = "us-east-1",
    ) -> None:
        self.clock = clock
        self.submit_rate = submit_rate
        self.region = region
        self.batch_backends: dict[tuple[str, str], EmbeddedBatch] = {}
        self.training_backends: dict[tuple[str, str], EmbeddedTraining] = {}
        self._emitters: list[Any] = []
        self._saved_env: dict[str, str | None] = {}
        self._endpoint = LoopbackEndpoint(self)

    def _clock(self) -> float:
        # Backends hold this method, not ``clock`` itself, so that replacing ``clock`` reaches them.
        return self.clock()

    def batch(self, account_id: str, region: str) -> EmbeddedBatch:
        """The emulated Batch of ``account_id`` in ``region`` (created on first use)."""
        key = (account_id, region)
        if key not in self.batch_backends:
            self.batch_backends[key] = EmbeddedBatch(
                account_id, region, clock=self._clock, throttle=Throttle(self.submit_rate)
            )
        return self.batch_backends[key]

    def training(self, account_id: str, region: str) -> EmbeddedTraining:
        """The emulated SageMaker training jobs of ``account_id`` in ``region`` (created on first use)."""
        key = (account_id, region)
        if key not in self.training_backends:
            self.training_backends[key] = EmbeddedTraining(account_id, region, clock=self._clock)
        return self.training_backends[key]

    def set_submit_rate(self, limit: int | None) -> None:
        """SubmitServiceJob calls allowed per second per account from now on (None: unlimited);
        the calls counted so far are forgotten."""
        self.submit_rate = limit
        for backend in self.batch_backends.values():
            backend.throttle.limit = limit
            backend.throttle.reset()

    # ------------------------------------------------------------------ in front of moto
    @staticmethod
    def moto_config() -> dict[str, Any]:
        """moto's ``core`` configuration for ``mock_aws(config=...)``: requests to the emulator's
        endpoint are not moto's (``passthrough.urls``); the other ``core`` settings are moto's
        defaults."""
        return {
            "mock_credentials": True,
            "passthrough": {"urls": [ENDPOINT_PATTERN.pattern], "services": []},
            "reset_boto3_session": True,
            "service_whitelist": None,
        }

    @classmethod
    def active(cls) -> Overlay | None:
        """The installed overlay, if any."""
        return cls._active

    @property
    def installed(self) -> bool:
        """Whether this overlay is in front of moto."""
        return Overlay._active is self

    def install(self, emitters: Iterable[Any] = ()) -> None:
        """Put the emulator in front of moto: Batch and SageMaker clients created from now on use
        its endpoint, and :meth:`before_send` answers the requests of clients made from
        ``emitters`` (boto3 sessions' ``events``; a client copies its session's emitter when it
        is created) and from those of earlier installs. Idempotent.

        Raises:
            RuntimeError: another emulator is installed.
        """
        if Overlay._active is not None and Overlay._active is not self:
            raise RuntimeError("an emulator is already installed in front of moto")
        if Overlay._active is None:
            urls = endpoints(self._endpoint.start().base_url)
            for service_id, name in ENDPOINT_ENV.items():
                self._saved_env[name] = os.environ.get(name)
                os.environ[name] = urls[service_id]
            Overlay._active = self
        for emitter in emitters:
            if not any(emitter is known for known in self._emitters):
                self._emitters.append(emitter)
        for emitter in self._emitters:  # a unique id registers once
            emitter.register_first("before-send", self.before_send, unique_id=_UNIQUE_ID)

    def uninstall(self) -> None:
        """Give moto its requests back: clients created from now on use AWS's endpoints (moto's
        "Not yet implemented" for the service-job APIs), and the emulator answers no request (its
        loopback endpoint stops: a client made while it was installed cannot connect). Idempotent;
        :meth:`install` puts it back for the same emitters."""
        for emitter in self._emitters:
            emitter.unregister("before-send", unique_id=_UNIQUE_ID)
        if Overlay._active is self:
            for name, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            self._saved_env.clear()
            self._endpoint.stop()
            Overlay._active = None

    def before_send(self, request: Any, event_name: str = "", **_: Any) -> Any:
        """botocore ``before-send`` handler: the ``AWSResponse`` to a request on the emulator's
        endpoint (``event_name`` is ``before-send.<service id>.<Operation>``); None for any other
        request, and for every request while moto's stubber is off or this overlay is not
        installed."""
        from moto.core.models import botocore_stubber

        if not self.installed or not botocore_stubber.enabled or service_of(str(request.url)) is None:
            return None
        return self.answer(request, event_name)

    def answer(self, request: Any, event_name: str = "", identity: Identity | None = None) -> Any:
        """The ``AWSResponse`` to a botocore ``AWSPreparedRequest`` on the emulator's endpoint: the
        emulator's own (:func:`~.routing.route`) or, for what it does not serve, moto's answer to
        the same request sent to AWS's endpoint. The operation is the one ``event_name``
        (``<event>.<service id>.<Operation>``) names, else the one the request shows
        (:func:`~.routing.operation_of`); ``identity`` defaults to the request's
        (:func:`~.routing.request_identity`). None for a request that is not on that endpoint.

        Raises:
            whatever moto or the emulator raise that is not an AWS error answer (a bug, or a
            request member the emulator does not model: ``NotImplementedError``).
        """
        from botocore.awsrequest import AWSPreparedRequest
        from moto.core.models import botocore_stubber

        service_id = service_of(str(request.url))
        if service_id is None:
            return None
        names = event_name.split(".")
        operation = (
            names[2] if len(names) > 2 and names[1] == service_id else operation_of(service_id, request)
        )
        identity = identity or request_identity(request, self.region)
        answer: Response | None = route(service_id, operation, request, self, identity)
        if answer is not None:
            return http_response(request.url, *answer)
        moto_request = AWSPreparedRequest(
            request.method,
            aws_url(service_id, request.url, identity.region),
            request.headers,
            request.body,
            request.stream_output,
        )
        return botocore_stubber(
            event_name=event_name or f"before-send.{service_id}.{operation}", request=moto_request
        )

    def answer_http(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> Any:
        """:meth:`answer` for a request that came over the loopback endpoint (:mod:`.endpoint`)."""
        from botocore.awsrequest import AWSPreparedRequest, HTTPHeaders

        http_headers = HTTPHeaders()
        for name, value in headers:
            http_headers[name] = value
        return self.answer(AWSPreparedRequest(method, url, http_headers, body, False))
