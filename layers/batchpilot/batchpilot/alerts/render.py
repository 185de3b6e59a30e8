"""Messages people read: what every channel shows (title, facts table, console links, durations)
and the pieces of the on-call topic's SNS messages (:class:`SnsMessage`, :class:`OnCallFormat`;
the messages themselves are :mod:`batchpilot.alerts.oncall`'s). Pure. Each chat channel renders
its own format from these pieces in its adapter (:mod:`batchpilot.alerts.channels.slack` Block Kit,
:mod:`batchpilot.alerts.channels.teams` Adaptive Cards).

SNS limits honoured (Amazon SNS ``Publish`` API reference): ``Subject`` ASCII, no control characters
or line breaks, fewer than 100 characters (kept at most 99: moto rejects 100); ``Message`` at most
256 KB (262,144 bytes, message attributes included): long reasons are truncated, and a
plain-text body still over :data:`SNS_BODY_MAX_BYTES` (long ids, a digest of long names) is cut
at that many UTF-8 bytes (:func:`fit_bytes`), so SNS never refuses it (``InvalidParameter``).
Every cut is marked visibly with :data:`TRUNCATION_MARK` (``…[truncated]``) so a reader knows text
is missing.

Every channel's headline starts with the severity (``[CRITICAL] <title>`` on the topic,
``Critical: <title>`` in chat: :func:`top_text`).

The on-call topic's body is plain text (:attr:`OnCallFormat.TEXT`, the default), or, with
``OnCallMessageFormat=amazon-q``, JSON in Amazon Q Developer in chat applications' custom
notification schema (:mod:`batchpilot.alerts.amazon_q`); the subject and the message attributes
are the same in both.

Two headlines per fact. :func:`title` is the whole sentence (``container job llama3-8b-lora-ft-run-39
resubmitted as ... from its checkpoint (resubmission 1) (SPOT_INTERRUPTION) on gpu-spot-queue``):
the SNS body's first line and the chat messages' one-line text, which have room for it.
:func:`headline` is what fits where the channel counts characters, by design rather than by a
cut: the SNS subject (99), Slack's header block (150) and the Teams card's title (the same 150).
It says what happened and to what, ``Resubmitted (SPOT_INTERRUPTION): container job
llama3-8b-lora-ft-run-39 on gpu-spot-queue``; `` on <job queue>`` is left out when it does not fit,
and a name too long for the room keeps its start and its end around ``…`` (job and job queue names
are up to 128 characters: AWS Batch SubmitJob ``jobName``, CreateJobQueue ``jobQueueName``). What
the headline leaves out is in the message's fields (:func:`facts_table`): the job queue, the new
job, the checkpoint, the resubmission number.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from urllib.parse import quote

from batchpilot.alerts.facts import AlertFact, FactKind
from batchpilot.alerts.policy import Severity
from batchpilot.shared.arns import resource_name
from batchpilot.shared.classification import Category, JobKind

__all__ = [
    "ASCII_TRUNCATION_MARK",
    "DIGEST_REASON_MAX",
    "ELISION_MARK",
    "EMOJI",
    "SNS_BODY_MAX_BYTES",
    "SNS_MESSAGE_MAX_BYTES",
    "SNS_SUBJECT_MAX",
    "TOP_TEXT_MAX",
    "TRUNCATION_MARK",
    "OnCallFormat",
    "SnsMessage",
    "console_links",
    "digest_headline",
    "elide",
    "facts_table",
    "fit_bytes",
    "format_duration",
    "group_headline",
    "headline",
    "hint",
    "job_label",
    "plain",
    "sanitize_subject",
    "subject_name",
    "title",
    "top_text",
    "truncate",
]

SNS_SUBJECT_MAX = 99
SNS_MESSAGE_MAX_BYTES = 262_144
"""Amazon SNS Publish: the message, attributes included, in UTF-8 bytes (256 KB)."""
SNS_BODY_MAX_BYTES = 240_000
"""UTF-8 bytes a plain-text body is cut to: below :data:`SNS_MESSAGE_MAX_BYTES`, leaving room for
the subject and the message attributes (each attribute value at most a job queue, share or alarm
name, far below 1 KB)."""
SNS_REASON_MAX = 20_000
"""Characters of a failure reason kept in an SNS body (the body stays far below 256 KB)."""
TOP_TEXT_MAX = 3000
"""Characters of a chat message's one-line text (notifications and screen readers read it)."""
DIGEST_REASON_MAX = 160
"""Characters of each job's reason in a chat digest."""
TRUNCATION_MARK = "…[truncated]"
ASCII_TRUNCATION_MARK = "..."
ELISION_MARK = "…"
"""What stands for the middle of a name :func:`elide` shortened (``...`` in SNS subjects: ASCII)."""
_MIN_NAME_ROOM = 12
"""Below this many characters for the name, a headline is cut at its end instead."""
_BOUNDARY = re.compile(r"[-_./: ]")

EMOJI = {Severity.CRITICAL: "🔴", Severity.WARNING: "🟠", Severity.INFO: "🔵", Severity.SILENT: "⚪"}
"""The severity's mark in a chat headline."""
_KIND_LABEL = {
    JobKind.CONTAINER_JOB: "container job",
    JobKind.SERVICE_JOB: "service job",
    JobKind.TRAINING_JOB: "training job",
}


class OnCallFormat(StrEnum):
    """The on-call topic's message body (template parameter ``OnCallMessageFormat``)."""

    TEXT = "text"
    """Plain text for email and pager subscribers (the default)."""
    AMAZON_Q = "amazon-q"
    """Amazon Q Developer in chat applications' custom notification JSON, which it renders in
    Slack and Teams (it drops other messages); email subscribers then read JSON."""


@dataclass(frozen=True, slots=True)
class SnsMessage:
    """One SNS ``Publish`` request's content.

    Attributes:
        subject: sanitised subject (ASCII, ≤99 characters).
        body: plain text for email and pager subscribers.
        attributes: SNS ``MessageAttributes`` values (``String``): ``severity``, ``job_queue``,
            ``category``, ``event_kind``, ``share_identifier``, ``priority``, ``alarm_name`` (and
            ``fallback_from`` when chat channels failed; and ``group_size`` for a digest); empty
            values are left out (SNS rejects them).
    """

    subject: str
    body: str
    attributes: dict[str, str]


# ----------------------------------------------------------------------------------- text helpers
def truncate(text: str, limit: int, mark: str = TRUNCATION_MARK) -> str:
    """``text`` if it fits in ``limit`` characters, else its start followed by ``mark`` (total ≤ limit).

    A cut never leaves half of a Slack entity (``&amp;``, ``&lt;``, ``&gt;``) at the end.
    """
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(mark))
    head = re.sub(r"&[a-z]{0,3}$", "", text[:keep])
    return head + mark[: max(0, limit - len(head))]


def fit_bytes(text: str, limit: int, mark: str = TRUNCATION_MARK) -> str:
    """``text`` if its UTF-8 form (lone surrogates counted as ``?``) fits in ``limit`` bytes, else its
    start followed by ``mark``, in at most ``limit`` bytes and never cutting a character in two."""
    if len(text) * 4 <= limit or len(text.encode("utf-8", "replace")) <= limit:
        return text
    room = max(0, limit - len(mark.encode("utf-8")))
    head = text.encode("utf-8", "replace")[:room].decode("utf-8", "ignore")
    return head + mark


def sanitize_subject(text: str, limit: int = SNS_SUBJECT_MAX) -> str:
    """An SNS subject SNS accepts: ASCII (accents folded, other characters dropped), control
    characters and line breaks turned into spaces, spaces collapsed, at most ``limit`` (99)
    characters, with ``...`` when cut. Never empty (``batchpilot alert``)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    cleaned = re.sub(r"[\x00-\x1f\x7f]", " ", folded)
    cleaned = re.sub(r"\s+", " ", cleaned).strip()
    if not cleaned:
        cleaned = "batchpilot alert"
    if len(cleaned) > limit:
        cleaned = cleaned[: limit - len(ASCII_TRUNCATION_MARK)].rstrip() + ASCII_TRUNCATION_MARK
    return cleaned


def plain(text: str) -> str:
    """One line of plain text: control characters become spaces."""
    return re.sub(r"\s+", " ", re.sub(r"[\x00-\x1f\x7f]", " ", text)).strip()


def format_duration(seconds: float | None) -> str | None:
    """``3725`` → ``1h 02m 05s``; ``65`` → ``1m 05s``; ``7`` → ``7s``; None/negative → None."""
    if seconds is None or seconds < 0:
        return None
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m {secs:02d}s"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _span(start: datetime | None, end: datetime | None) -> str | None:
    if start is None or end is None:
        return None
    return format_duration((end - start).total_seconds())


# ----------------------------------------------------------------------------------------- title
def subject_name(fact: AlertFact) -> str:
    """The last part of the fact's subject (a job id, a training job or service environment name)."""
    return resource_name(fact.subject) or fact.subject or "unknown"


def job_label(fact: AlertFact) -> str:
    """``service job llama-pretrain``: the job's kind and name (its id when the event has no name)."""
    kind = _KIND_LABEL.get(fact.job_kind, "job") if fact.job_kind else "job"
    return f"{kind} {fact.job_name or subject_name(fact)}"


def _category(category: Category | None) -> str:
    return f" ({category.value})" if category else ""


def top_text(severity: Severity, headline: str) -> str:
    """A chat message's one-line text: ``Critical: <headline>`` (at most 3,000 characters)."""
    return truncate(f"{severity.value.capitalize()}: {plain(headline)}", TOP_TEXT_MAX)


def _alarm_title(fact: AlertFact) -> str:
    alarm = fact.alarm
    assert alarm is not None
    if alarm.resolved:
        return f"resolved: alarm {alarm.name} is OK again"
    if alarm.state.value == "INSUFFICIENT_DATA":
        return f"alarm {alarm.name} has insufficient data"
    return f"alarm {alarm.name} is in {alarm.state.value}"


def title(fact: AlertFact) -> str:
    """A one-line headline, e.g. ``service job llama-pretrain FAILED (CAPACITY) on ml-training-highpri``
    or ``alarm batchpilot/prod/AlertsErrorsAlarm is in ALARM``."""
    if fact.alarm:
        return _alarm_title(fact)
    queue = f" on {fact.job_queue}" if fact.job_queue else ""
    category = _category(fact.category)
    job = job_label(fact)
    match fact.event_kind:
        case FactKind.QUEUE_BLOCKED:
            return f"job queue {fact.job_queue or '?'} blocked{category}: {job} cannot start"
        case FactKind.PREEMPTION_STARTED:
            return f"{job} is being preempted{queue}"
        case FactKind.PREEMPTION_COMPLETED:
            return f"{job} was preempted and requeued{queue}"
        case FactKind.JOB_RESUBMITTED:
            how = "from step 0" if fact.restarts_from_step_zero else "from its checkpoint"
            if fact.dry_run:
                return f"[dry run] {job} would be resubmitted {how}, nothing submitted{category}{queue}"
            new = dict(fact.extra).get("New job")
            as_new = f" as {new}" if new else ""
            return f"{job} resubmitted{as_new} {how} (resubmission {fact.attempts}){category}{queue}"
        case FactKind.RECOVERY_SKIPPED:
            dry = "[dry run] " if fact.dry_run else ""
            return f"{dry}recovery skipped for {job}: {fact.reason_code}{queue}"
        case FactKind.RECOVERY_FAILED:
            return f"resubmission of {job} failed: {fact.reason_code}{queue}"
        case FactKind.CAPACITY_ADJUSTED:
            return f"capacity adjusted: {subject_name(fact)}"
        case FactKind.CAPACITY_LIMITED:
            return f"capacity limited ({fact.reason_code}): {subject_name(fact)}"
        case FactKind.JOB_STARVING:
            extra = dict(fact.extra)
            share = fact.quota_share or fact.share_identifier or "no share"
            priority = "unknown" if fact.priority is None else fact.priority
            how = extra.get("Waiting") or f"{extra.get('Preemptions', '?')} preemptions"
            return f"{job} is starving ({fact.reason_code}): share {share}, priority {priority}, {how}{queue}"
        case FactKind.JOB_GPU_IDLE:
            extra = dict(fact.extra)
            share = fact.quota_share or fact.share_identifier or "no share"
            priority = "unknown" if fact.priority is None else fact.priority
            what = "GPUs stalled" if fact.reason_code == "STALLED" else "GPUs idle"
            held = f"{extra.get('Instances', '?')} ({extra.get('GPUs', '?')} GPUs)"
            if fact.is_resolution:  # the episode's end: how long it lasted
                return (
                    f"{job} GPUs active again after {extra.get('Idle for', '?')} idle: share {share},"
                    f" {held} at {extra.get('GPU activity', '?')}{queue}"
                )
            return (
                f"{job} {what} for {extra.get('Idle for', '?')}: share {share}, priority {priority},"
                f" {held} at {extra.get('GPU activity', '?')}{queue}"
            )
    status = fact.status or "?"
    if fact.secondary_status and fact.secondary_status != status:
        status = f"{status}/{fact.secondary_status}"
    if not fact.terminal and fact.category is Category.SPOT_INTERRUPTION:
        return f"{job} lost an attempt to a spot interruption; AWS is retrying{queue}"
    return f"{job} {status}{category}{queue}"


def elide(name: str, room: int, mark: str = ELISION_MARK) -> str:
    """``name`` in at most ``room`` characters: whole when it fits, else its start and its end
    around ``mark`` (the end of a job name tells runs apart: ``...-run-39``, ``...-r2-bp3f``), each
    side cut at a word boundary (``-``, ``_``, ``.``, ``/``, ``:``, space) when one is near."""
    if len(name) <= room:
        return name
    keep = room - len(mark)
    if keep < 2:
        return name[:room]
    head_len = (keep * 2 + 2) // 3
    head = name[:head_len]
    cut = max((m.end() for m in _BOUNDARY.finditer(head)), default=0)
    if cut >= head_len // 2:
        head = head[:cut]
    tail_len = keep - len(head)
    tail = name[len(name) - tail_len :]
    start = next((m.start() for m in _BOUNDARY.finditer(tail)), None)
    if start is not None and start < tail_len // 2:
        tail = tail[start:]
    return head + mark + tail


def _fit(lead: str, name: str, where: str, limit: int, mark: str) -> str:
    """``lead + name + where`` in at most ``limit`` characters: ``where`` is left out when it does
    not fit, then ``name`` is elided; a cut at the end only when not even that leaves room."""
    if len(lead) + len(name) + len(where) <= limit:
        return lead + name + where
    if len(lead) + len(name) <= limit:
        return lead + name
    room = limit - len(lead)
    if room < _MIN_NAME_ROOM:
        return truncate(lead + name, limit, mark)
    return lead + elide(name, room, mark)


def _headline_parts(fact: AlertFact) -> tuple[str, str, str]:
    """``(what happened: , name, on <job queue>)`` for :func:`headline`, each on one line."""
    queue = f" on {plain(fact.job_queue)}" if fact.job_queue else ""
    category = _category(fact.category)
    job = plain(job_label(fact))
    dry = "[dry run] " if fact.dry_run else ""
    code = f" ({plain(str(fact.reason_code))})" if fact.reason_code else ""
    match fact.event_kind:
        case FactKind.QUEUE_BLOCKED:
            return f"Job queue blocked{category}: ", plain(fact.job_queue or "?"), ""
        case FactKind.PREEMPTION_STARTED:
            return "Being preempted: ", job, queue
        case FactKind.PREEMPTION_COMPLETED:
            return "Preempted and requeued: ", job, queue
        case FactKind.JOB_RESUBMITTED:
            what = "Would resubmit" if fact.dry_run else "Resubmitted"
            return f"{dry}{what}{category}: ", job, queue
        case FactKind.RECOVERY_SKIPPED:
            return f"{dry}Recovery skipped{code}: ", job, queue
        case FactKind.RECOVERY_FAILED:
            return f"Resubmission failed{code}: ", job, queue
        case FactKind.CAPACITY_ADJUSTED:
            return "Capacity adjusted: ", plain(subject_name(fact)), ""
        case FactKind.CAPACITY_LIMITED:
            return f"Capacity limited{code}: ", plain(subject_name(fact)), ""
        case FactKind.JOB_STARVING:
            return f"Starving{code}: ", job, queue
        case FactKind.JOB_GPU_IDLE:
            if fact.is_resolution:
                return "GPUs active again: ", job, queue
            return f"GPUs idle{code}: ", job, queue
    if not fact.terminal and fact.category is Category.SPOT_INTERRUPTION:
        return "Attempt lost to spot, Batch retrying: ", job, queue
    status = fact.status or "?"
    if fact.secondary_status and fact.secondary_status != status:
        status = f"{status}/{fact.secondary_status}"
    return f"{status}{category}: ", job, queue


def headline(fact: AlertFact, limit: int, mark: str = ELISION_MARK) -> str:
    """The fact's headline in at most ``limit`` characters, e.g. ``Resubmitted (SPOT_INTERRUPTION):
    container job llama3-8b-lora-ft-run-39 on gpu-spot-queue`` (see the module docstring): what
    happened, then the job (or the job queue, or the service environment), then its job queue
    when that fits; a name too long is elided in its middle with ``mark``."""
    if fact.alarm:
        return _alarm_headline(fact, limit, mark)
    lead, name, where = _headline_parts(fact)
    return _fit(lead, name, where, limit, mark)


def _alarm_headline(fact: AlertFact, limit: int, mark: str) -> str:
    """:func:`_alarm_title` in at most ``limit`` characters: the alarm's state stays, its name (up
    to 255 characters: PutMetricAlarm ``AlarmName``) is elided in its middle when needed."""
    alarm = fact.alarm
    assert alarm is not None
    if alarm.resolved:
        lead, suffix = "resolved: alarm ", " is OK again"
    elif alarm.state.value == "INSUFFICIENT_DATA":
        lead, suffix = "alarm ", " has insufficient data"
    else:
        lead, suffix = "alarm ", f" is in {alarm.state.value}"
    name = plain(alarm.name)
    room = limit - len(lead) - len(suffix)
    if len(name) <= room:
        return lead + name + suffix
    if room < _MIN_NAME_ROOM:
        return truncate(lead + name + suffix, limit, mark)
    return lead + elide(name, room, mark) + suffix


# ----------------------------------------------------------------------------------------- links
def _logs_fragment(value: str) -> str:
    # The CloudWatch console double-encodes path parts in its fragment: "/" → "%2F" → "$252F".
    return quote(value, safe="").replace("%", "$25")


def _job_url(base: str, region: str, arn: str) -> str | None:
    """The console page of a Batch job / service job (``...:job/ID``, ``...:service-job/ID``) or a
    SageMaker training job (``...:training-job/NAME``) ARN; None for anything else."""
    name = resource_name(arn)
    if not name:
        return None
    if ":batch:" in arn:
        return f"{base}/batch/home?region={region}#jobs/detail/{quote(name, safe='')}"
    if ":sagemaker:" in arn:
        return f"{base}/sagemaker/home?region={region}#/jobs/{quote(name, safe='')}"
    return None


def console_links(fact: AlertFact) -> list[tuple[str, str]]:
    """``[(label, url)]``: the Batch job, the SageMaker training job and its CloudWatch logs (or
    the CloudWatch alarm) in the AWS console of the event's region (nothing without a region)."""
    region = fact.region
    if not region:
        return []
    base = f"https://{region}.console.aws.amazon.com"
    links: list[tuple[str, str]] = []
    if fact.alarm:
        name = quote(fact.alarm.name, safe="")
        return [("Alarm", f"{base}/cloudwatch/home?region={region}#alarmsV2:alarm/{name}")]
    if fact.event_kind is FactKind.JOB_RESUBMITTED:
        # Both jobs: the failed one (the subject) and its successor (related_subjects).
        for label, arn in (("Failed job", fact.subject), *(("New job", a) for a in fact.related_subjects)):
            url = _job_url(base, region, arn)
            if url:
                links.append((label, url))
        return links
    if fact.job_kind in {JobKind.CONTAINER_JOB, JobKind.SERVICE_JOB} and fact.job_id:
        links.append(
            ("Batch job", f"{base}/batch/home?region={region}#jobs/detail/{quote(fact.job_id, safe='')}")
        )
    if fact.training_job_name:
        links.append(
            (
                "Training job",
                f"{base}/sagemaker/home?region={region}#/jobs/{quote(fact.training_job_name, safe='')}",
            )
        )
    if fact.log_group and fact.log_stream:
        group = _logs_fragment(fact.log_group)
        if fact.log_stream.endswith("/"):  # a stream prefix: the group's streams, filtered
            url = f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{group}"
            url += "$3FlogStreamNameFilter$3D" + _logs_fragment(fact.log_stream)
        else:
            url = (
                f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/{group}"
                f"/log-events/{_logs_fragment(fact.log_stream)}"
            )
        links.append(("Logs", url))
    return links


# ----------------------------------------------------------------------------------------- facts
def hint(fact: AlertFact) -> str | None:
    """What a person can do about a failure whose category says it (job events), else None.

    OUT_OF_MEMORY: the container's ``MEMORY`` resource requirement (AWS Batch User Guide, "Memory
    management") or a larger instance type; QUOTA: a Service Quotas increase for the quota named.
    """
    if fact.category is Category.OUT_OF_MEMORY:
        if fact.job_kind is JobKind.CONTAINER_JOB:
            return "give the job more memory (its MEMORY resource requirement) or a larger instance type"
        # A SageMaker training job's memory is its instance type's (host and GPU memory).
        return "use a larger instance type (more host or GPU memory), or less memory per step"
    if fact.category is Category.QUOTA:
        what = f"'{fact.quota}'" if fact.quota else "named in the reason"
        return f"request an increase of the account service quota {what} in Service Quotas; not resubmitted"
    return None


def _alarm_rows(fact: AlertFact) -> list[tuple[str, str | None]]:
    alarm = fact.alarm
    if alarm is None:
        return []
    state = alarm.state.value
    if alarm.previous_state is not None:
        state += f" (was {alarm.previous_state.value})"
    lasted = _span(alarm.previous_changed_at, alarm.changed_at) if alarm.resolved else None
    return [
        ("Alarm", alarm.name),
        ("State", state),
        ("Since", alarm.changed_at.isoformat(timespec="seconds")),
        ("In ALARM for", lasted),
        ("Metrics", ", ".join(alarm.metrics) or None),
        ("Alarm action", "notifies its SNS topic itself" if alarm.notified_directly else None),
    ]


def facts_table(fact: AlertFact) -> list[tuple[str, str]]:
    """``[(label, value)]`` in display order, without empty values (reason excluded)."""
    rows: list[tuple[str, str | None]] = [
        *_alarm_rows(fact),
        ("Job", fact.job_name),
        ("Owner", fact.owner.value if fact.owner else None),
        ("Job queue", fact.job_queue),
        ("Share", fact.share_identifier),
        ("Quota share", fact.quota_share),
        ("Status", f"{fact.status}/{fact.secondary_status}" if fact.secondary_status else fact.status),
        ("Priority", str(fact.priority) if fact.priority is not None else None),
        ("Preempted by share", fact.preempting_share),
        ("Category", fact.category.value if fact.category else None),
        ("Quota", fact.quota),
        ("Hint", hint(fact)),
        ("Attempts", str(fact.attempts) if fact.attempts else None),
        ("Wait time", _span(fact.created_at, fact.first_started_at)),
        ("Run time", _span(fact.started_at, fact.stopped_at)),
        (
            "Instances",
            f"{fact.instance_type} x {fact.instance_count}"
            if fact.instance_type and fact.instance_count
            else fact.instance_type,
        ),
        *fact.extra,
    ]
    return [(label, value) for label, value in rows if value]


def _group_parts(facts: Sequence[AlertFact], total: int | None = None) -> tuple[str, str]:
    """``(lead, name)`` of a burst's headline: the job queue is the name :func:`digest_headline`
    may elide. ``total``: facts the message stands for when more than it lists (a summary)."""
    first = facts[0]
    count = max(total or 0, len(facts))
    if all(f.alarm for f in facts):
        return f"{count} alarms: {first.status}", ""
    kinds = {f.job_kind for f in facts}
    kind = _KIND_LABEL.get(first.job_kind, "job") if first.job_kind else "job"
    noun = kind + "s" if len(kinds) == 1 else "jobs"
    what = first.category.value if first.category else (first.status or first.event_kind.value)
    lead = f"{count} {noun}: {what}"
    return (f"{lead} on ", plain(first.job_queue)) if first.job_queue else (lead, "")


def group_headline(facts: Sequence[AlertFact], total: int | None = None) -> str:
    """``40 container jobs: SPOT_INTERRUPTION on ml-training-highpri`` (``6 alarms: ALARM``): a
    burst in one line (``total``: as :func:`_group_parts`)."""
    lead, queue = _group_parts(facts, total)
    return lead + queue


def digest_headline(
    facts: Sequence[AlertFact], limit: int, mark: str = ELISION_MARK, total: int | None = None
) -> str:
    """:func:`group_headline` in at most ``limit`` characters: the job queue's name (the burst's
    identity, up to 128 characters) elided in its middle when it does not fit."""
    lead, queue = _group_parts(facts, total)
    return _fit(lead, queue, "", limit, mark)
