"""AWS Batch's REST-JSON wire format for :class:`~.models.EmbeddedBatch`: a request body (members
named as in the API, as botocore serialised them) becomes a backend call, its result the response
body; errors become Batch's error responses (``x-amzn-ErrorType`` header, ``{"message"}`` body)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from moto.core.exceptions import InvalidToken

from batchpilot_local.emulator.batch.exceptions import BATCH_ERROR_NAMESPACE, ClientException
from batchpilot_local.emulator.batch.models import EmbeddedBatch, StoredJob
from batchpilot_local.emulator.batch.utils import (
    check_max_results,
    check_tags,
    ids,
    job_summary,
    service_summary,
)
from batchpilot_local.emulator.core import ApiError, Response, json_response

__all__ = ["OPERATIONS", "BatchResponse", "error_response"]

OPERATIONS = frozenset(
    {
        "CreateServiceEnvironment",
        "DescribeServiceEnvironments",
        "UpdateServiceEnvironment",
        "DeleteServiceEnvironment",
        "SubmitServiceJob",
        "DescribeServiceJob",
        "ListServiceJobs",
        "UpdateServiceJob",
        "TerminateServiceJob",
        "GetJobQueueSnapshot",
        "CreateJobQueue",
        "DescribeJobQueues",
        "UpdateJobQueue",
        "DeleteJobQueue",
        "CreateQuotaShare",
        "ListQuotaShares",
        "SubmitJob",
        "DescribeJobs",
        "ListJobs",
        "TerminateJob",
        "CancelJob",
    }
)
"""The Batch operations answered here (botocore's names); every other one goes to moto. Tags
(TagResource, UntagResource, ListTagsForResource) are answered by :meth:`BatchResponse.tags` for
the resources this backend owns."""

# SubmitJob members the emulator does not model: refused loudly rather than silently dropped.
_UNSUPPORTED_SUBMIT_JOB = ("nodeOverrides", "eksPropertiesOverride", "ecsPropertiesOverride")


def error_response(error: ApiError) -> Response:
    """Batch's error answer: HTTP ``error.status``, ``x-amzn-ErrorType: <code>:<namespace>``,
    body ``{"message": ...}`` (what botocore's REST-JSON parser reads ``Error.Code`` from)."""
    return json_response(
        {"message": error.message},
        status=error.status,
        **{"x-amzn-ErrorType": f"{error.code}:{BATCH_ERROR_NAMESPACE}"},
    )


def _snake(operation: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", operation).lower()


class BatchResponse:
    """Answers Batch requests with ``backend`` (one account and region)."""

    def __init__(self, backend: EmbeddedBatch) -> None:
        self.backend = backend

    def dispatch(self, operation: str, body: Mapping[str, Any]) -> Response:
        """The HTTP answer to ``operation`` (one of :data:`OPERATIONS`) with request ``body``.

        API errors become error answers; a bug in the emulator is not turned into a 500 but
        propagates as the Python exception it is.

        Raises:
            KeyError: ``operation`` is not one of :data:`OPERATIONS`.
            NotImplementedError: a request member the emulator does not model (SubmitJob
                node/EKS/ECS overrides).
        """
        if operation not in OPERATIONS:
            raise KeyError(operation)
        method: Callable[[Mapping[str, Any]], dict[str, Any]] = getattr(self, _snake(operation))
        try:
            return json_response(method(body))
        except ApiError as error:
            return error_response(error)
        except InvalidToken:
            # moto's paginator refused the token; Batch says it this way.
            return error_response(ClientException("Invalid nextToken"))

    def tags(self, method: str, arn: str, body: Mapping[str, Any], tag_keys: list[str]) -> Response | None:
        """ListTagsForResource (GET), TagResource (POST) or UntagResource (DELETE, ``tag_keys``
        from the query string) on ``arn``; None when the backend does not own that resource type
        (moto answers)."""
        try:
            tags = self.backend.tags_of(arn, create=method == "POST")
            if tags is None:
                return None
            if method == "GET":
                return json_response({"tags": dict(tags)})
            if method == "POST":
                tags.update(check_tags({**tags, **body.get("tags", {})}))
            else:
                for key in tag_keys:
                    tags.pop(key, None)
            return json_response({})
        except ApiError as error:
            return error_response(error)

    # ------------------------------------------------------------------ service environments
    def create_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """CreateServiceEnvironment → ``{serviceEnvironmentName, serviceEnvironmentArn}``."""
        env = self.backend.create_service_environment(
            name=p["serviceEnvironmentName"],
            environment_type=p["serviceEnvironmentType"],
            capacity_limits=p["capacityLimits"],
            state=p.get("state"),
            tags=p.get("tags"),
        )
        return _environment_ids(env)

    def describe_service_environments(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DescribeServiceEnvironments → ``{serviceEnvironments, nextToken?}`` (pages ≤ 100)."""
        check_max_results(p.get("maxResults"), 100)
        page, token = self.backend.describe_service_environments(
            service_environments=list(p.get("serviceEnvironments") or []),
            max_results=p.get("maxResults"),
            next_token=p.get("nextToken"),
        )
        return _with_token({"serviceEnvironments": page}, token)

    def update_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """UpdateServiceEnvironment → ``{serviceEnvironmentName, serviceEnvironmentArn}``."""
        env = self.backend.update_service_environment(
            p["serviceEnvironment"], state=p.get("state"), capacity_limits=p.get("capacityLimits")
        )
        return _environment_ids(env)

    def delete_service_environment(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DeleteServiceEnvironment → ``{}``."""
        self.backend.delete_service_environment(p["serviceEnvironment"])
        return {}

    # ------------------------------------------------------------------ job queues
    def create_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """CreateJobQueue → ``{jobQueueName, jobQueueArn}``."""
        queue = self.backend.create_job_queue(
            name=p["jobQueueName"],
            priority=p["priority"],
            state=p.get("state"),
            scheduling_policy_arn=p.get("schedulingPolicyArn"),
            compute_environment_order=p.get("computeEnvironmentOrder") or [],
            service_environment_order=p.get("serviceEnvironmentOrder") or [],
            job_queue_type=p.get("jobQueueType"),
            job_state_time_limit_actions=p.get("jobStateTimeLimitActions") or [],
            tags=p.get("tags"),
        )
        return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}

    def describe_job_queues(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DescribeJobQueues → ``{jobQueues, nextToken?}`` (pages ≤ 100)."""
        check_max_results(p.get("maxResults"), 100)
        page, token = self.backend.describe_job_queues(
            job_queues=list(p.get("jobQueues") or []),
            max_results=p.get("maxResults"),
            next_token=p.get("nextToken"),
        )
        return _with_token({"jobQueues": page}, token)

    def update_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """UpdateJobQueue → ``{jobQueueName, jobQueueArn}``."""
        queue = self.backend.update_job_queue(
            p["jobQueue"],
            state=p.get("state"),
            priority=p.get("priority"),
            scheduling_policy_arn=p.get("schedulingPolicyArn"),
            compute_environment_order=p.get("computeEnvironmentOrder") or [],
            service_environment_order=p.get("serviceEnvironmentOrder") or [],
            job_state_time_limit_actions=p.get("jobStateTimeLimitActions"),
        )
        return {"jobQueueName": queue.name, "jobQueueArn": queue.arn}

    def delete_job_queue(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DeleteJobQueue → ``{}``."""
        self.backend.delete_job_queue(p["jobQueue"])
        return {}

    # ------------------------------------------------------------------ quota shares
    def create_quota_share(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """CreateQuotaShare → ``{quotaShareName, quotaShareArn}``."""
        share = self.backend.create_quota_share(
            name=p["quotaShareName"],
            job_queue=p["jobQueue"],
            capacity_limits=p["capacityLimits"],
            resource_sharing_configuration=p["resourceSharingConfiguration"],
            preemption_configuration=p["preemptionConfiguration"],
            state=p.get("state"),
            tags=p.get("tags"),
        )
        return {"quotaShareName": share["quotaShareName"], "quotaShareArn": share["quotaShareArn"]}

    def list_quota_shares(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """ListQuotaShares → ``{quotaShares, nextToken?}`` (pages ≤ 100)."""
        check_max_results(p.get("maxResults"), 100)
        page, token = self.backend.list_quota_shares(
            job_queue=p["jobQueue"], max_results=p.get("maxResults"), next_token=p.get("nextToken")
        )
        return _with_token({"quotaShares": page}, token)

    # ------------------------------------------------------------------ service jobs
    def submit_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """SubmitServiceJob → ``{jobArn, jobName, jobId}``."""
        job = self.backend.submit_service_job(
            job_name=p["jobName"],
            job_queue=p["jobQueue"],
            service_job_type=p["serviceJobType"],
            service_request_payload=p["serviceRequestPayload"],
            client_token=p.get("clientToken"),
            share_identifier=p.get("shareIdentifier"),
            quota_share_name=p.get("quotaShareName"),
            scheduling_priority=p.get("schedulingPriority"),
            retry_strategy=p.get("retryStrategy"),
            timeout_config=p.get("timeoutConfig"),
            preemption_configuration=p.get("preemptionConfiguration"),
            tags=p.get("tags"),
        )
        return ids(job.detail)

    def describe_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DescribeServiceJob → the job's detail."""
        return self.backend.describe_service_job(p["jobId"])

    def list_service_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """ListServiceJobs → ``{jobSummaryList, nextToken?}``."""
        page, token = self.backend.list_service_jobs(
            job_queue=p.get("jobQueue"),
            job_status=p.get("jobStatus"),
            filters=p.get("filters") or [],
            max_results=p.get("maxResults"),
            next_token=p.get("nextToken"),
        )
        return _with_token({"jobSummaryList": [service_summary(j.detail) for j in page]}, token)

    def update_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """UpdateServiceJob → ``{jobArn, jobName, jobId}``."""
        return ids(self.backend.update_service_job(p["jobId"], p["schedulingPriority"]).detail)

    def terminate_service_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """TerminateServiceJob → ``{}``."""
        self.backend.terminate_service_job(p["jobId"], p["reason"])
        return {}

    def get_job_queue_snapshot(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """GetJobQueueSnapshot → ``{frontOfQueue, queueUtilization, frontOfQuotaShares?}``."""
        return self.backend.get_job_queue_snapshot(p["jobQueue"])

    # ------------------------------------------------------------------ container jobs
    def submit_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """SubmitJob → ``{jobArn, jobName, jobId}``."""
        for unsupported in _UNSUPPORTED_SUBMIT_JOB:
            if p.get(unsupported):
                raise NotImplementedError(f"embedded Batch: SubmitJob {unsupported} is not supported")
        job = self.backend.submit_job(
            job_name=p["jobName"],
            job_queue=p["jobQueue"],
            job_definition=p["jobDefinition"],
            share_identifier=p.get("shareIdentifier"),
            scheduling_priority_override=p.get("schedulingPriorityOverride"),
            array_properties=p.get("arrayProperties"),
            depends_on=p.get("dependsOn") or [],
            parameters=p.get("parameters"),
            container_overrides=p.get("containerOverrides"),
            retry_strategy=p.get("retryStrategy"),
            propagate_tags=p.get("propagateTags"),
            timeout=p.get("timeout"),
            tags=p.get("tags"),
        )
        return ids(job.detail)

    def describe_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """DescribeJobs → ``{jobs}``."""
        return {"jobs": self.backend.describe_jobs(list(p["jobs"]))}

    def list_jobs(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """ListJobs → ``{jobSummaryList, nextToken?}``."""
        page, token = self.backend.list_jobs(
            job_queue=p.get("jobQueue"),
            array_job_id=p.get("arrayJobId"),
            multi_node_job_id=p.get("multiNodeJobId"),
            job_status=p.get("jobStatus"),
            filters=p.get("filters") or [],
            max_results=p.get("maxResults"),
            next_token=p.get("nextToken"),
        )
        return _with_token({"jobSummaryList": [self._job_summary(j) for j in page]}, token)

    def _job_summary(self, job: StoredJob) -> dict[str, Any]:
        return job_summary(self.backend.job_view(job))

    def terminate_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """TerminateJob → ``{}``."""
        self.backend.terminate_job(p["jobId"], p["reason"])
        return {}

    def cancel_job(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """CancelJob → ``{}``."""
        self.backend.cancel_job(p["jobId"], p["reason"])
        return {}


def _environment_ids(env: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "serviceEnvironmentName": env["serviceEnvironmentName"],
        "serviceEnvironmentArn": env["serviceEnvironmentArn"],
    }


def _with_token(out: dict[str, Any], token: str | None) -> dict[str, Any]:
    if token:
        out["nextToken"] = token
    return out
