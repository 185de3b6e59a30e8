"""The emulator's loopback endpoint: an HTTP server on 127.0.0.1 (an ephemeral port) that answers
each request with :meth:`.Overlay.answer`, for clients whose session the emulator's ``before-send``
handler is not registered on (a ``boto3.Session()`` made by the code under test, say). Those
clients reach it as they would reach AWS, over HTTP, through botocore's own HTTP client;
clients of the sessions the emulator knows are answered in process and never use it.
"""

from __future__ import annotations

import contextlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

__all__ = ["LoopbackEndpoint"]


class _Answers(Protocol):
    def answer_http(self, method: str, url: str, headers: list[tuple[str, str]], body: bytes) -> Any:
        """The ``AWSResponse`` to a request that came over HTTP, or None (nobody answers it)."""
        ...


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"  # keep-alive, as AWS's endpoints: botocore reuses connections

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: the replay reports, the endpoint does not print."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = f"{self.server.base_url}{self.path}"
        try:
            response = self.server.answers.answer_http(self.command, url, list(self.headers.items()), body)
        except Exception as exc:  # a bug, or a member the emulator does not model: a 500 that says so
            response = None
            status, headers, data = (
                500,
                {"Content-Type": "text/plain"},
                f"{type(exc).__name__}: {exc}".encode(),
            )
        else:
            if response is None:
                status, headers, data = 404, {"Content-Type": "text/plain"}, b"not an emulated service"
            else:
                status, headers, data = response.status_code, dict(response.headers), response.content
        with contextlib.suppress(OSError):  # the client may have given up
            self.send_response(int(status))
            for name, value in headers.items():
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, str(value))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    answers: _Answers
    base_url: str

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Silent: a client that gave up is expected here."""


class LoopbackEndpoint:
    """An HTTP server on 127.0.0.1 whose requests ``answers.answer_http`` answers. ``start`` /
    ``stop`` (both idempotent); :attr:`base_url` while started."""

    def __init__(self, answers: _Answers) -> None:
        self._answers = answers
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``.

        Raises:
            RuntimeError: not started.
        """
        if self._server is None:
            raise RuntimeError("the emulator's loopback endpoint is not started")
        return self._server.base_url

    def start(self) -> LoopbackEndpoint:
        """Listen on 127.0.0.1 at an ephemeral port (idempotent)."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), _Handler)
            server.answers = self._answers
            server.base_url = f"http://127.0.0.1:{server.server_address[1]}"
            self._server = server
            self._thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="embedded-aws", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening (idempotent)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
