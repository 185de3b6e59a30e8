"""The capacity policy (pure): examples of each rule, then hypothesis properties over random demand."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from batchpilot.capacity.model import NUM_INSTANCES, CapacityLimit, ServiceEnvironment
from batchpilot.capacity.policy import (
    Action,
    EnvironmentDecision,
    EnvironmentState,
    Reason,
    decide,
    notices,
)
from batchpilot.capacity.sampling import UnitDemand
from batchpilot.capacity.settings import PolicyDefaults, UnitBounds
from batchpilot.shared.own_events import CapacityAdjusted, CapacityLimited, CapacityLimitReason
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

T0 = datetime(2026, 11, 20, 22, 0, tzinfo=UTC)
ARN = "arn:aws:batch:us-east-1:111122223333:service-environment/sm-training"


def env(
    current: int, *, state: str = "ENABLED", status: str = "VALID", unit: str = NUM_INSTANCES
) -> ServiceEnvironment:
    return ServiceEnvironment("sm-training", ARN, state, status, (CapacityLimit(unit, current),))


def demand(
    in_use: int, runnable: int, blocked: int = 0, unit: str = NUM_INSTANCES, unknown: int = 0
) -> dict[str, UnitDemand]:
    job = "arn:aws:batch:us-east-1:111122223333:service-job/blocked" if blocked else None
    return {unit: UnitDemand(unit, in_use, runnable, blocked, job, unknown)}


POLICY = PolicyDefaults()  # headroom 0, max_step 16, window 10 min, cooldown 3 min
BOUNDS = {NUM_INSTANCES: UnitBounds(min=0, max=64)}


def one(decision: EnvironmentDecision):  # type: ignore[no-untyped-def]
    (unit,) = decision.units
    return unit


@dataclass
class Sim:
    """Runs the policy minute by minute against an environment whose limit follows each change."""

    current: int
    bounds: UnitBounds = field(default_factory=lambda: UnitBounds(min=0, max=64))
    policy: PolicyDefaults = POLICY
    state: EnvironmentState = field(default_factory=EnvironmentState)
    now: datetime = T0
    log: list[tuple[datetime, int, int, object]] = field(default_factory=list)

    def tick(
        self,
        in_use: int,
        runnable: int,
        *,
        blocked: int = 0,
        minutes: int = 1,
        floor: int = 0,
        unknown: int = 0,
        **kw,
    ):  # type: ignore[no-untyped-def]
        decision = decide(
            env(self.current, **kw),
            demand(in_use, runnable, blocked, unknown=unknown),
            {NUM_INSTANCES: self.bounds},
            {NUM_INSTANCES: floor},
            self.policy,
            self.state,
            self.now,
        )
        unit = one(decision)
        self.log.append((self.now, unit.target, self.current, unit))
        self.state = decision.state
        if unit.changes:
            self.current = unit.new_max
        self.now += timedelta(minutes=minutes)
        return unit


# ------------------------------------------------------------------------------------ examples


def test_a_burst_is_followed_at_once_in_bounded_steps_one_per_cooldown() -> None:
    sim = Sim(current=8)
    first = sim.tick(8, 40)  # 48 wanted
    assert (first.action, first.reason, first.new_max) == (Action.RAISE, Reason.DEMAND, 24)
    assert "step bound 16" in first.message
    cooling = [sim.tick(8, 40) for _ in range(2)]  # minutes 1 and 2: cooldown
    assert [(u.action, u.reason) for u in cooling] == [(Action.HOLD, Reason.COOLDOWN)] * 2
    assert cooling[0].limit_reason is CapacityLimitReason.COOLDOWN
    second = sim.tick(8, 40)  # minute 3: cooldown over
    assert (second.action, second.new_max) == (Action.RAISE, 40)
    sim.tick(8, 40)
    sim.tick(8, 40)
    third = sim.tick(8, 40)
    assert (third.action, third.new_max) == (Action.RAISE, 48)
    assert sim.tick(8, 40).reason is Reason.STEADY


def test_demand_above_max_is_capped_and_says_at_max() -> None:
    sim = Sim(current=60)
    unit = sim.tick(50, 30)
    assert (unit.action, unit.new_max, unit.desired, unit.limit_reason) == (
        Action.RAISE,
        64,
        80,
        CapacityLimitReason.AT_MAX,
    )
    sim.tick(50, 30, minutes=5)
    held = sim.tick(50, 30)
    assert (held.action, held.reason, held.limit_reason) == (
        Action.HOLD,
        Reason.STEADY,
        CapacityLimitReason.AT_MAX,
    )


def test_a_blocked_job_gets_what_it_needs_in_one_change_despite_the_step_bound() -> None:
    sim = Sim(current=8, policy=POLICY.model_copy(update={"max_step": 4}))
    unit = sim.tick(0, 24, blocked=24)
    assert (unit.action, unit.reason, unit.new_max, unit.limit_reason) == (
        Action.RAISE,
        Reason.BLOCKED_JOB,
        24,
        None,
    )
    assert unit.blocked_job and unit.blocked_job.endswith("/blocked")


def test_a_blocked_job_larger_than_max_is_a_critical_refusal() -> None:
    sim = Sim(current=16, bounds=UnitBounds(min=0, max=32))
    unit = sim.tick(0, 48, blocked=48)
    assert (unit.action, unit.new_max) == (Action.RAISE, 32)
    assert unit.limit_reason is CapacityLimitReason.BLOCKED_JOB_EXCEEDS_MAX
    assert "needs 48, more than max 32" in unit.message


def test_a_quiet_night_lowers_only_after_the_window_and_never_below_in_use() -> None:
    sim = Sim(current=48)
    for minute in range(10):
        unit = sim.tick(12, 0)
        assert (unit.action, unit.reason) == (Action.HOLD, Reason.STABILISING), minute
    assert "for 9 of 10 minutes" in unit.message
    lowered = sim.tick(12, 0)  # 10 minutes below: lower to the highest target in the window
    assert (lowered.action, lowered.new_max) == (Action.LOWER, 12)
    assert lowered.new_max >= lowered.in_use


def test_lowering_goes_to_the_highest_target_seen_in_the_window() -> None:
    sim = Sim(current=48)
    targets = [10, 30, 10, 10, 10, 10, 10, 10, 10, 10]
    for value in targets:
        sim.tick(value, 0)
    lowered = sim.tick(10, 0)
    assert (lowered.action, lowered.new_max) == (Action.LOWER, 30)


def test_demand_back_above_the_limit_restarts_the_stabilisation_window() -> None:
    sim = Sim(current=32)
    for _ in range(6):
        sim.tick(4, 0)
    assert sim.tick(32, 0).reason is Reason.STEADY  # back at the limit: the run of "below" ends
    for _ in range(9):
        assert sim.tick(4, 0).reason is Reason.STABILISING
    assert sim.tick(4, 0).reason is Reason.STABILISING
    assert sim.tick(4, 0).action is Action.LOWER


def test_unread_payloads_can_raise_the_limit_but_never_lower_it() -> None:
    sim = Sim(current=48)
    for _ in range(15):  # 12 in use, 3 jobs of unknown size (counted as 1 each): looks like 15
        unit = sim.tick(12, 3, unknown=3)
        assert (unit.action, unit.reason) == (Action.HOLD, Reason.DEMAND_UNKNOWN)
    assert "3 RUNNABLE jobs' payloads are not read yet" in unit.message
    # Read at last: the stabilisation window starts only now.
    assert [sim.tick(12, 3).reason for _ in range(10)] == [Reason.STABILISING] * 10
    assert sim.tick(12, 3).action is Action.LOWER
    raised = Sim(current=8).tick(8, 40, unknown=10)  # a lower bound of demand still raises
    assert (raised.action, raised.new_max) == (Action.RAISE, 24)


def test_instances_in_use_hold_the_limit() -> None:
    sim = Sim(current=20, bounds=UnitBounds(min=0, max=16))  # someone set 20 by hand; 20 in use
    for _ in range(12):
        unit = sim.tick(20, 0)
    assert (unit.action, unit.reason, unit.new_max) == (Action.HOLD, Reason.IN_USE, 20)


def test_a_min_bound_is_reached_in_one_change() -> None:
    sim = Sim(current=0, bounds=UnitBounds(min=40, max=64))
    unit = sim.tick(0, 0)
    assert (unit.action, unit.reason, unit.new_max) == (Action.RAISE, Reason.MIN_BOUND, 40)


def test_an_open_scheduled_floor_raises_and_holds_then_releases_after_the_window() -> None:
    sim = Sim(current=4)
    unit = sim.tick(0, 0, floor=24)
    assert (unit.action, unit.reason, unit.new_max) == (Action.RAISE, Reason.SCHEDULED_FLOOR, 24)
    assert all(sim.tick(0, 0, floor=24).reason is Reason.STEADY for _ in range(20))
    reasons = [sim.tick(0, 0).reason for _ in range(11)]
    assert reasons[:10] == [Reason.STABILISING] * 10
    assert sim.current == 0


@pytest.mark.parametrize(
    ("state", "status"), [("DISABLED", "VALID"), ("ENABLED", "UPDATING"), ("ENABLED", "INVALID")]
)
def test_environments_that_are_not_enabled_and_valid_are_left_alone(state: str, status: str) -> None:
    sim = Sim(current=8)
    unit = sim.tick(8, 40, state=state, status=status)
    assert (unit.action, unit.reason, unit.new_max) == (Action.LEAVE_ALONE, Reason.NOT_VALID, 8)
    assert unit.limit_reason is CapacityLimitReason.NOT_VALID
    assert f"state {state}, status {status}" in unit.message
    # Nothing asked: nothing refused.
    assert Sim(current=8).tick(8, 0, state=state, status=status).limit_reason is None


def test_quota_management_units_are_decided_each_on_its_own_and_changed_together() -> None:
    environment = ServiceEnvironment(
        "sm-quota",
        None,
        "ENABLED",
        "VALID",
        (
            CapacityLimit("ml.p4d.24xlarge", 4),
            CapacityLimit("ml.g5.xlarge", 8),
            CapacityLimit("ml.c5.xlarge", 2),
        ),
    )
    demands = {
        "ml.p4d.24xlarge": UnitDemand("ml.p4d.24xlarge", 4, 4),
        "ml.g5.xlarge": UnitDemand("ml.g5.xlarge", 8, 0),
    }
    bounds = {"ml.p4d.24xlarge": UnitBounds(max=6), "ml.g5.xlarge": UnitBounds(max=16)}
    decision = decide(environment, demands, bounds, {}, POLICY, EnvironmentState(), T0)
    p4d, g5, c5 = decision.units
    assert (p4d.action, p4d.new_max, p4d.limit_reason) == (Action.RAISE, 6, CapacityLimitReason.AT_MAX)
    assert (g5.action, g5.reason) == (Action.HOLD, Reason.STEADY)
    assert (c5.action, c5.reason) == (Action.LEAVE_ALONE, Reason.UNMANAGED_UNIT)
    assert decision.changes
    assert decision.capacity_limits == (
        CapacityLimit("ml.p4d.24xlarge", 6),
        CapacityLimit("ml.g5.xlarge", 8),
        CapacityLimit("ml.c5.xlarge", 2),
    )
    assert decision.state.last_change_at == T0


def test_a_run_older_than_the_last_change_is_in_cooldown() -> None:
    state = EnvironmentState(last_change_at=T0)
    decision = decide(env(8), demand(8, 40), BOUNDS, {}, POLICY, state, T0 - timedelta(minutes=30))
    assert one(decision).reason is Reason.COOLDOWN


def test_the_same_inputs_give_the_same_decision() -> None:
    a = decide(env(8), demand(8, 40), BOUNDS, {}, POLICY, EnvironmentState(), T0)
    b = decide(env(8), demand(8, 40), BOUNDS, {}, POLICY, EnvironmentState(), T0)
    assert a == b


# ------------------------------------------------------------------------------------ notices


def test_every_change_is_an_adjusted_event_with_its_inputs() -> None:
    decision = decide(env(8), demand(8, 40), BOUNDS, {}, POLICY, EnvironmentState(), T0)
    events, memory = notices(decision, {}, timedelta(hours=1))
    (event,) = events
    assert isinstance(event, CapacityAdjusted)
    assert (event.previous_max, event.new_max, event.in_use, event.runnable_demand, event.desired) == (
        8,
        24,
        8,
        40,
        48,
    )
    assert (event.reason, event.service_environment_arn, event.dry_run) == ("DEMAND", ARN, False)
    assert event.message and event.message.startswith("raised sm-training from 8 to 24")
    assert "adjusted:NUM_INSTANCES" in memory


def test_an_unchanged_refusal_is_published_once_per_repeat_interval() -> None:
    state = EnvironmentState()
    published: list[object] = []
    now = T0
    for minute in range(130):
        decision = decide(env(64), demand(60, 30), BOUNDS, {}, POLICY, state, now)
        events, memory = notices(decision, state.notices, timedelta(minutes=60))
        published += [(minute, e) for e in events]
        state = replace(decision.state, notices=memory)
        now += timedelta(minutes=1)
    assert [m for m, _ in published] == [0, 60, 120]
    assert all(
        isinstance(e, CapacityLimited) and e.limit_reason is CapacityLimitReason.AT_MAX for _, e in published
    )
    # A refusal that says something new is published at once.
    decision = decide(env(64), demand(60, 50), BOUNDS, {}, POLICY, state, now)
    events, _ = notices(decision, state.notices, timedelta(minutes=60))
    assert [type(e) for e in events] == [CapacityLimited]
    assert events[0].desired == 110  # type: ignore[union-attr]


def test_dry_run_changes_are_reported_without_repeating_every_minute() -> None:
    state = EnvironmentState()
    counts = []
    for minute in range(5):
        decision = decide(env(8), demand(8, 8), BOUNDS, {}, POLICY, state, T0 + timedelta(minutes=minute))
        events, memory = notices(decision, state.notices, timedelta(minutes=60), dry_run=True)
        counts.append(len(events))
        # Dry run: the limit never moves and the cooldown never starts.
        state = replace(decision.state, notices=memory, last_change_at=None)
        if events:
            assert isinstance(events[0], CapacityAdjusted) and events[0].dry_run
            assert events[0].message and events[0].message.startswith("dry run: would have raised")
    assert counts == [1, 0, 0, 0, 0]


def test_a_failed_update_is_reported_as_update_failed() -> None:
    decision = decide(env(8), demand(8, 40), BOUNDS, {}, POLICY, EnvironmentState(), T0)
    events, _ = notices(decision, {}, timedelta(hours=1), failed=True)
    (event,) = events
    assert isinstance(event, CapacityLimited) and event.limit_reason is CapacityLimitReason.UPDATE_FAILED
    assert event.message.startswith("UpdateServiceEnvironment failed")


# ------------------------------------------------------------------------------------ properties

bounds_st = st.tuples(st.integers(0, 40), st.integers(0, 80)).map(
    lambda pair: UnitBounds(min=min(pair), max=max(pair))
)
policy_st = st.builds(
    PolicyDefaults,
    headroom=st.integers(0, 4),
    max_step=st.integers(1, 24),
    stabilisation_window_minutes=st.integers(0, 15),
    cooldown_minutes=st.integers(0, 6),
)
tick_st = st.tuples(
    st.integers(0, 100),  # in use
    st.integers(0, 120),  # RUNNABLE demand
    st.sampled_from([0, 0, 0, 0, 8, 70, 150]),  # blocked job need
    st.sampled_from([1, 1, 1, 1, 2, 5]),  # minutes to the next run
    st.sampled_from([0, 0, 0, 30]),  # open scheduled floor
    st.sampled_from([("ENABLED", "VALID")] * 6 + [("DISABLED", "VALID"), ("ENABLED", "UPDATING")]),
    st.sampled_from([0, 0, 0, 0, 0, 3]),  # RUNNABLE jobs whose payload is not read yet
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bounds=bounds_st,
    policy=policy_st,
    start=st.integers(0, 120),
    ticks=st.lists(tick_st, min_size=1, max_size=60),
)
def test_random_demand_sequences_respect_every_rule(
    bounds: UnitBounds,
    policy: PolicyDefaults,
    start: int,
    ticks: list[tuple[int, int, int, int, int, tuple[str, str], int]],
) -> None:
    sim = Sim(current=start, bounds=bounds, policy=policy)
    changes: list[tuple[datetime, object]] = []
    history: list[tuple[datetime, bool]] = []  # (time, demand known to be below the limit)
    for in_use, runnable, blocked, gap, floor, (state, status), unknown in ticks:
        now = sim.now
        limit_before = sim.current
        unit = sim.tick(
            in_use,
            runnable,
            blocked=blocked,
            minutes=gap,
            floor=floor,
            state=state,
            status=status,
            unknown=unknown,
        )
        history.append((now, unit.target < limit_before and not unknown))
        if not unit.changes:
            assert unit.new_max == limit_before
            continue
        changes.append((now, unit))
        # Never outside [min, max]; only ENABLED + VALID environments change.
        assert bounds.min <= unit.new_max <= bounds.max
        assert (state, status) == ("ENABLED", "VALID")
        if unit.action is Action.LOWER:
            # Never below what is in use, and only after a full window of demand below the limit.
            assert unit.new_max >= in_use
            assert unit.new_max < limit_before
            run_start = now
            for when, below in reversed(history):
                if not below:
                    break
                run_start = when
            assert now - run_start >= timedelta(minutes=policy.stabilisation_window_minutes)
        else:
            assert unit.new_max > limit_before
            # Scale up at once: by the step, or straight to a configured minimum / blocked need.
            assert unit.new_max <= max(
                limit_before + policy.max_step, bounds.min, min(floor, bounds.max), blocked
            )
    # At most one change per cooldown.
    for (earlier, _), (later, _) in pairwise(changes):
        assert later - earlier >= timedelta(minutes=policy.cooldown_minutes)


@settings(max_examples=200, deadline=None)
@given(
    bounds=bounds_st,
    policy=policy_st,
    start=st.integers(0, 120),
    in_use=st.integers(0, 100),
    runnable=st.integers(0, 120),
    ramp=st.lists(st.tuples(st.integers(0, 100), st.integers(0, 120)), max_size=10),
)
def test_steady_demand_never_oscillates(
    bounds: UnitBounds,
    policy: PolicyDefaults,
    start: int,
    in_use: int,
    runnable: int,
    ramp: list[tuple[int, int]],
) -> None:
    sim = Sim(current=start, bounds=bounds, policy=policy)
    for before in ramp:  # any history first
        sim.tick(*before)
    directions = []
    # Then the same demand every minute, long enough to get anywhere: every raise step after a
    # cooldown, and one lowering after a window.
    steps = 200 // policy.max_step + 2
    minutes = steps * (policy.cooldown_minutes + 1) + policy.stabilisation_window_minutes + 2
    for _ in range(minutes):
        unit = sim.tick(in_use, runnable)
        if unit.changes:
            directions.append(unit.action)
    # One direction only, and then still: no raise after a lower, no lower after a raise.
    assert len(set(directions)) <= 1
    last = [sim.tick(in_use, runnable) for _ in range(3)]
    assert not any(u.changes for u in last)
    target = min(max(in_use + runnable + policy.headroom, bounds.min), bounds.max)
    # It settles on the target unless instances in use (above max) hold it higher.
    assert sim.current == target or (sim.current > target and last[-1].reason is Reason.IN_USE)
