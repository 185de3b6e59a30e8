"""Idle capacity across teams (ledger/idle.py): reserved instances idle in one service environment
while jobs that would fit them wait in another, and instances each quota share lends; examples
and Hypothesis properties (bounds, no fit, no self-lending)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from batchpilot.ledger.fleet import FleetInputs
from batchpilot.ledger.idle import (
    EnvironmentUse,
    environment_uses,
    idle_elsewhere,
    idle_points,
    lent_instances,
)
from batchpilot.ledger.model import AggregateKey, Delta, JobDetails, JobStatus, Observation
from batchpilot.ledger.ports import Aggregate, ListedJob, QueueInfo
from batchpilot.ledger.service import LedgerService
from batchpilot.ledger.settings import LedgerSettings
from batchpilot.shared.classification import JobKind
from batchpilot.shared.metrics import MetricsDetail
from batchpilot.shared.settings import ConfigError
from batchpilot_local.testing.ledger import FakeBatch, ListSink, MemoryLedgerStore
from hypothesis import given
from hypothesis import strategies as st

T0 = datetime(2026, 11, 25, 8, 0, tzinfo=UTC)
P5, P4 = "ml.p5.48xlarge", "ml.p4d.24xlarge"


def agg(env: str, queue: str, status: JobStatus, jobs: int, types: dict[str, int], **kw: object) -> Aggregate:
    instances = sum(types.values())
    delta = Delta(jobs, jobs, instances, 0, 0.0, tuple(sorted(types.items())))
    return Aggregate(AggregateKey(env, queue, str(kw.get("share", "")), status), delta, bool(kw.get("quota")))


def two_teams(**overrides: object) -> FleetInputs:
    """Team A's environment: 8 reserved p5, 2 in use. Team B's: 8 reserved p5, all in use, and
    jobs of 4 p5 and 2 p4d instances waiting."""
    aggregates = {
        "team-a-q": [agg("team-a", "team-a-q", JobStatus.RUNNING, 1, {P5: 2})],
        "team-b-q": [
            agg("team-b", "team-b-q", JobStatus.RUNNING, 2, {P5: 8}),
            agg("team-b", "team-b-q", JobStatus.RUNNABLE, 2, {P5: 4, P4: 2}),
        ],
    }
    fields: dict[str, object] = {
        "queues": {
            "team-a-q": QueueInfo("team-a-q", True, "team-a"),
            "team-b-q": QueueInfo("team-b-q", True, "team-b"),
        },
        "aggregates": aggregates,
        "limits": {"team-a": 8, "team-b": 8},
        "reserved": {"team-a": 8, "team-b": 8},
        "weights": {},
        "oldest": {},
    }
    fields.update(overrides)
    return FleetInputs(**fields)  # type: ignore[arg-type]


def test_idle_instances_of_one_team_while_the_others_jobs_of_that_type_wait() -> None:
    inputs = two_teams()
    uses = environment_uses(inputs.aggregates, inputs.reserved)
    assert uses["team-a"] == EnvironmentUse(8, 2, frozenset({P5}), {})
    assert uses["team-b"].runnable == {P5: 4, P4: 2}
    idle = idle_elsewhere(uses)
    # 6 p5 free in team-a; team-b waits for 4 p5 (its p4d job does not fit team-a's p5)
    assert idle.total == 4
    assert idle.by_environment == {"team-a": 4}
    assert idle.waiting == {"team-b": 4}
    points = {(p.name, p.dimensions): p.value for p in idle_points(inputs, T0)}
    assert points == {("IdleWhileQueuedElsewhere", ()): 4}
    detailed = {(p.name, p.dimensions) for p in idle_points(inputs, T0, MetricsDetail.DETAILED)}
    assert ("IdleWhileQueuedElsewhere", (("ServiceEnvironment", "team-a"),)) in detailed


def test_nothing_when_the_waiting_jobs_are_of_another_instance_type() -> None:
    aggregates = {
        "team-a-q": [agg("team-a", "team-a-q", JobStatus.RUNNING, 1, {P5: 2})],
        "team-b-q": [agg("team-b", "team-b-q", JobStatus.RUNNABLE, 1, {P4: 4})],
    }
    inputs = two_teams(aggregates=aggregates, reserved={"team-a": 8, "team-b": 0})
    assert idle_points(inputs, T0) == []  # published only while above zero


def test_a_teams_own_free_capacity_takes_its_own_jobs_first() -> None:
    # team-b has 2 p5 free of its own: only the other 2 of its 4 waiting p5 count against team-a.
    uses = {
        "team-a": EnvironmentUse(8, 2, frozenset({P5}), {}),
        "team-b": EnvironmentUse(10, 8, frozenset({P5}), {P5: 4}),
    }
    assert idle_elsewhere(uses).total == 2


def test_an_environment_of_unknown_type_lends_nothing_and_several_types_fit_either() -> None:
    uses = {
        "empty": EnvironmentUse(16, 0),  # no active job: the type of its free capacity is unknown
        "mixed": EnvironmentUse(6, 2, frozenset({P5, P4})),
        "waiting": EnvironmentUse(0, 0, frozenset({P4}), {P4: 3, P5: 3}),
    }
    idle = idle_elsewhere(uses)
    assert idle.by_environment == {"mixed": 4}  # 4 free, fitting 3 p4d and 1 of the p5


def test_the_flow_finds_the_assignment_a_greedy_one_would_miss() -> None:
    # x (p5 or p4d) must serve the p4d demand so that y (p5 only) serves the p5 demand.
    uses = {
        "x": EnvironmentUse(2, 0, frozenset({P5, P4})),
        "y": EnvironmentUse(2, 0, frozenset({P5})),
        "z": EnvironmentUse(0, 0, frozenset(), {P5: 2, P4: 2}),
    }
    assert idle_elsewhere(uses).total == 4


def test_lent_instances_beside_borrowed() -> None:
    # research borrows 6 above its limit of 4: prod (limit 8, 2 in use) lends 6 of its 6 unused
    assert lent_instances({"research": 10, "prod": 2}, {"research": 4, "prod": 8}) == {"prod": 6}
    # two lenders with 4 and 2 unused, 3 borrowed: spread in proportion, 2 and 1
    assert lent_instances({"a": 7}, {"a": 4, "b": 4, "c": 2}) == {"b": 2, "c": 1}
    assert lent_instances({"a": 3}, {"a": 4, "b": 4}) == {}  # nobody borrows: nobody lends
    # b keeps its idle capacity (RESERVE): c alone lends, its 2 unused of the 3 borrowed
    assert lent_instances({"a": 7}, {"a": 4, "b": 4, "c": 2}, lenders={"a", "c"}) == {"c": 2}
    inputs = two_teams(
        aggregates={
            "quota-q": [
                agg("quota-env", "quota-q", JobStatus.RUNNING, 2, {P5: 10}, share="research", quota=True),
                agg("quota-env", "quota-q", JobStatus.RUNNING, 1, {P5: 2}, share="prod", quota=True),
            ]
        },
        quota_limits={"quota-q": {"research": 4, "prod": 8}},
    )
    points = {(p.name, p.dimensions): p.value for p in idle_points(inputs, T0)}
    assert points == {("LentInstances", (("JobQueue", "quota-q"), ("QuotaShare", "prod"))): 6}


# ---------------------------------------------------------------------------------- properties
TYPES = st.sampled_from([P5, P4, "ml.g5.48xlarge"])
ENVIRONMENT = st.builds(
    EnvironmentUse,
    reserved=st.integers(0, 40).map(float),
    in_use=st.floats(0, 50, allow_nan=False),
    types=st.frozensets(TYPES, max_size=3),
    runnable=st.dictionaries(TYPES, st.integers(0, 30).map(float), max_size=3),
)
WORLDS = st.dictionaries(st.sampled_from(["a", "b", "c", "d", "e"]), ENVIRONMENT, min_size=1, max_size=5)


@given(WORLDS)
def test_never_more_idle_than_reserved_minus_in_use(world: dict[str, EnvironmentUse]) -> None:
    idle = idle_elsewhere(world)
    assert idle.total <= sum(max(u.reserved - u.in_use, 0.0) for u in world.values()) + 1e-6
    for env, value in idle.by_environment.items():
        assert value <= world[env].free + 1e-6
    assert abs(sum(idle.by_environment.values()) - idle.total) < 1e-6
    assert abs(sum(idle.waiting.values()) - idle.total) < 1e-6


@given(WORLDS)
def test_never_more_than_the_demand_elsewhere_of_the_idle_types(world: dict[str, EnvironmentUse]) -> None:
    idle = idle_elsewhere(world)
    for env, value in idle.by_environment.items():
        fits = world[env].types
        elsewhere = sum(n for o, u in world.items() if o != env for t, n in u.runnable.items() if t in fits)
        assert value <= elsewhere + 1e-6
    for env, value in idle.waiting.items():
        assert value <= sum(world[env].runnable.values()) + 1e-6


@given(WORLDS)
def test_zero_when_no_job_elsewhere_would_fit(world: dict[str, EnvironmentUse]) -> None:
    # Every environment's jobs ask only for types no other environment's capacity is.
    isolated = {
        env: EnvironmentUse(u.reserved, u.in_use, frozenset({f"type-{env}"}), {f"type-{env}": n})
        for env, u in world.items()
        for n in [sum(u.runnable.values())]
    }
    assert idle_elsewhere(isolated).total == 0
    alone = {env: EnvironmentUse(u.reserved, u.in_use, u.types) for env, u in world.items()}
    assert idle_elsewhere(alone).total == 0  # nothing waits anywhere


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 20), min_size=1),
    st.dictionaries(st.sampled_from("abcdef"), st.floats(0, 40, allow_nan=False)),
)
def test_shares_lend_at_most_their_unused_limit_and_no_more_than_is_borrowed(
    limits: dict[str, int], in_use: dict[str, float]
) -> None:
    lenders = sorted(limits)[::2]
    lent = lent_instances(in_use, limits, lenders)
    assert set(lent) <= set(lenders)
    borrowed = sum(max(in_use.get(s, 0.0) - n, 0.0) for s, n in limits.items())
    assert sum(lent.values()) <= borrowed + 1e-6
    for share, value in lent.items():
        assert 0 < value <= limits[share] - in_use.get(share, 0.0) + 1e-6


def test_an_idle_environment_reserved_by_instance_type_counts_without_any_job() -> None:
    """``LedgerReservedInstances`` by instance type: team-a runs nothing, yet its 4 reserved p5
    instances are known to fit the p5 job team-b waits with (the service's run, in-memory ports)."""
    arn = "arn:aws:batch:us-east-1:111122223333:service-job/"
    p5 = JobDetails(queue="team-b-q", environment="team-b", instances=2, instance_type=P5, sized=True)
    details = {f"{arn}b-1": p5, f"{arn}b-2": p5}
    listed = {
        "team-b-q": [
            ListedJob(f"{arn}b-1", "b-1", JobKind.SERVICE_JOB, JobStatus.RUNNING),
            ListedJob(f"{arn}b-2", "b-2", JobKind.SERVICE_JOB, JobStatus.RUNNABLE),
        ]
    }
    queues = [QueueInfo("team-a-q", True, "team-a"), QueueInfo("team-b-q", True, "team-b")]

    def run(reserved: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        settings = LedgerSettings.from_environ(
            {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_RESERVED_INSTANCES": reserved}
        )
        batch = FakeBatch(details, queues=queues, listed=listed, limits={"team-a": 4, "team-b": 2})
        ledger = LedgerService(settings, MemoryLedgerStore(), batch, ListSink(), lambda: T0)
        ledger.apply(Observation(f"{arn}b-1", JobKind.SERVICE_JOB, JobStatus.RUNNING, T0))
        ledger.apply(Observation(f"{arn}b-2", JobKind.SERVICE_JOB, JobStatus.RUNNABLE, T0))
        ledger.run(T0)
        return {(p.name, p.dimensions): p.value for p in ledger.sink.pending}  # type: ignore[attr-defined]

    by_type = run(json.dumps({"team-a": {P5: 4}}))
    assert by_type[("ReservedInstances", (("ServiceEnvironment", "team-b"),))] == 2
    assert by_type[("IdleWhileQueuedElsewhere", ())] == 2  # b-2's 2 p5 instances would fit team-a's 4
    # Given as a count only, team-a's free instances are of no known type: nothing counted.
    assert ("IdleWhileQueuedElsewhere", ()) not in run(json.dumps({"team-a": 4}))


def test_reserved_instances_by_instance_type_are_summed_and_a_bad_value_names_the_variable() -> None:
    text = json.dumps({"a": 3, "b": {P5: 8, P4: 2}})
    settings = LedgerSettings.from_environ(
        {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_RESERVED_INSTANCES": text}
    )
    assert settings.reserved == {"a": 3, "b": 10}
    assert settings.reserved_types == {"b": (P4, P5)}
    for bad in ['{"a": {}}', '{"a": {"ml.p5.48xlarge": -1}}', '{"a": "3"}', "[1]", "{not json"]:
        with pytest.raises(ConfigError, match="BATCHPILOT_LEDGER_RESERVED_INSTANCES"):
            LedgerSettings.from_environ(
                {"BATCHPILOT_STATE_TABLE": "t", "BATCHPILOT_LEDGER_RESERVED_INSTANCES": bad}
            )
