"""AWS Secrets Manager through Powertools' parameters utility (``SecretsProvider``), cached.

Chat adapters read their webhook URLs and tokens here; the environment only names the secret (its
ARN). API: Secrets Manager ``GetSecretValue`` (IAM ``secretsmanager:GetSecretValue`` on that secret
only). Values are never logged: botocore logs whole response bodies (``SecretString``) at DEBUG,
so its response loggers are held at INFO or above.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["SECRET_MAX_AGE_SECONDS", "SecretSource", "protect_secret_logs"]

SECRET_MAX_AGE_SECONDS = 300
"""Powertools cache lifetime of a secret value: a rotated secret is used within 5 minutes."""

_SECRET_LOGGERS = ("botocore.parsers", "botocore.endpoint", "urllib3.connectionpool", "urllib3.util.retry")
"""Loggers that print request paths or response bodies at DEBUG (a webhook URL, ``SecretString``)."""


def protect_secret_logs() -> None:
    """Hold the loggers that would print secrets at DEBUG (:data:`_SECRET_LOGGERS`) at INFO."""
    for name in _SECRET_LOGGERS:
        log = logging.getLogger(name)
        if log.getEffectiveLevel() < logging.INFO:
            log.setLevel(logging.INFO)


class SecretSource:
    """Reads secrets with Powertools' ``SecretsProvider`` (cached), from an injected boto3 client.

    Implements :class:`batchpilot.alerts.ports.SecretReader`.

    Args:
        client: a boto3 Secrets Manager client (``batchpilot.io.clients.client("secretsmanager")``).
        max_age: cache lifetime in seconds.
    """

    def __init__(self, client: Any, max_age: int = SECRET_MAX_AGE_SECONDS) -> None:
        # Imported here: the parameters utility imports boto3, which a function without any
        # secret configured never needs at cold start.
        from aws_lambda_powertools.utilities.parameters import SecretsProvider

        protect_secret_logs()
        self._provider = SecretsProvider(boto3_client=client)
        self.max_age = max_age

    def get(self, secret_id: str) -> str:
        """The secret's string value (``GetSecretValue``; cached for :attr:`max_age` seconds).

        Raises:
            aws_lambda_powertools.utilities.parameters.GetParameterError: it cannot be read
                (AccessDenied, ResourceNotFound, throttled after retries).
        """
        value = self._provider.get(secret_id, max_age=self.max_age)
        if isinstance(value, bytes):
            return value.decode("utf-8")
        return str(value)
