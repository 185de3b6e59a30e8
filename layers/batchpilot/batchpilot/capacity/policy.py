"""The capacity policy: from demand, bounds and the environment's clock to a decision. Pure (no I/O).

For each capacity unit of a service environment (``NUM_INSTANCES``, or each instance type of a
quota-management environment), with every count in instances:

1. **target** = in use + RUNNABLE demand + headroom, raised to the configured ``min``, to an open
   scheduled floor and to what the largest blocked job needs
   (``MISCONFIGURATION:SERVICE_ENVIRONMENT_MAX_RESOURCE``), then clamped to ``max``. When demand or
   a blocked job asks for more than ``max``, the decision carries a limit reason (``AT_MAX``, or the
   critical ``BLOCKED_JOB_EXCEEDS_MAX``).
2. **raise** at once when the target is above the limit, by at most ``max_step`` for demand;
   ``min``, an open floor and a blocked job's need are reached in one change.
3. **lower** only after the target stayed below the limit for the whole stabilisation window, to
   the highest target seen in that window, and **never below the instances in use** (so
   batchpilot never causes a preemption) nor outside ``[min, max]``.
4. **cooldown**: no change within ``cooldown_minutes`` of the previous one (one environment-wide
   clock: one ``UpdateServiceEnvironment`` per cooldown at most).
5. While some RUNNABLE jobs' payloads are not read yet (the first runs after a deploy, within the
   per-run read budget), demand is a lower bound: it can raise the limit but never lower it.
6. Environments that are not ENABLED and VALID (DISABLED, INVALID, CREATING, UPDATING, ...) are
   left alone; their clocks keep running so the decision is ready when they are valid again.

:func:`decide` returns the decision and the environment's next state; :func:`notices` turns a
decision into the own events to publish (``Capacity Adjusted``, ``Capacity Limited``), repeating an
unchanged refusal only after ``notice_repeat_minutes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum

from batchpilot.capacity.model import CapacityLimit, ServiceEnvironment
from batchpilot.capacity.sampling import UnitDemand
from batchpilot.capacity.settings import PolicyDefaults, UnitBounds
from batchpilot.shared.own_events import CapacityAdjusted, CapacityLimited, CapacityLimitReason

__all__ = [
    "Action",
    "EnvironmentDecision",
    "EnvironmentState",
    "Notice",
    "Reason",
    "UnitClock",
    "UnitDecision",
    "decide",
    "notices",
]


class Action(StrEnum):
    """What the decision does to one capacity limit."""

    RAISE = "RAISE"
    LOWER = "LOWER"
    HOLD = "HOLD"  # managed, valid, and the limit stays as it is
    LEAVE_ALONE = "LEAVE_ALONE"  # not batchpilot's to change (environment not valid, unit unmanaged)


class Reason(StrEnum):
    """Why: a closed set, used as the ``Reason`` metric dimension and in own events."""

    DEMAND = "DEMAND"  # raised or lowered to follow in-use + RUNNABLE demand
    BLOCKED_JOB = "BLOCKED_JOB"  # raised so a job blocked by SERVICE_ENVIRONMENT_MAX_RESOURCE fits
    SCHEDULED_FLOOR = "SCHEDULED_FLOOR"  # raised to an open scheduled floor
    MIN_BOUND = "MIN_BOUND"  # raised to the configured min
    STEADY = "STEADY"  # the limit already matches the target
    STABILISING = "STABILISING"  # demand is below the limit, but not for a whole window yet
    COOLDOWN = "COOLDOWN"  # a change would be made, but the previous one is too recent
    IN_USE = "IN_USE"  # demand is below the limit, but instances in use keep it where it is
    DEMAND_UNKNOWN = "DEMAND_UNKNOWN"  # looks below the limit, but some payloads are not read yet
    NOT_VALID = "NOT_VALID"  # the environment is DISABLED, not VALID or mid-update
    UNMANAGED_UNIT = "UNMANAGED_UNIT"  # a capacity unit with no bounds in the configuration


@dataclass(frozen=True, slots=True)
class UnitClock:
    """The stabilisation clock of one capacity unit.

    Attributes:
        below_since: when the target first went below the limit in the current unbroken run of
            such runs (None when the last run's target was not below).
        history: ``(time, target)`` of the runs within the last stabilisation window.
    """

    below_since: datetime | None = None
    history: tuple[tuple[datetime, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Notice:
    """The last own event of one kind published for one capacity unit (for de-duplication).

    Attributes:
        key: what it said (reason and values); an event saying the same again is held back.
        at: when it was published.
    """

    key: str
    at: datetime


@dataclass(frozen=True, slots=True)
class EnvironmentState:
    """What the capacity function remembers about one service environment (DynamoDB).

    Attributes:
        version: incremented on every save (optimistic locking between overlapping runs).
        last_change_at: the last ``UpdateServiceEnvironment`` batchpilot made (cooldown clock).
        clocks: capacity unit → stabilisation clock.
        notices: ``"<kind>:<unit>"`` → the last notice published (kind ``adjusted`` or ``limited``).
    """

    version: int = 0
    last_change_at: datetime | None = None
    clocks: Mapping[str, UnitClock] = field(default_factory=dict)
    notices: Mapping[str, Notice] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class UnitDecision:
    """The decision for one capacity unit.

    Attributes:
        unit: ``NUM_INSTANCES`` or an instance type.
        action: see :class:`Action`; ``new_max`` differs from ``current_max`` only for RAISE/LOWER.
        reason: see :class:`Reason`.
        current_max, new_max: the limit before and after (instances).
        desired: what demand asks for before ``max`` is applied (in use + RUNNABLE + headroom,
            raised to min, floor and blocked need).
        target: ``desired`` clamped to ``max``.
        in_use, runnable: the inputs (instances).
        limit_reason: set when demand gets less than it asks for (``Capacity Limited``).
        blocked_job: ARN of the largest job blocked by the limit, if any.
        bounds: the configured bounds (None for an unmanaged unit).
        message: one sentence for people: what, from, to, and why.
    """

    unit: str
    action: Action
    reason: Reason
    current_max: int
    new_max: int
    desired: int
    target: int
    in_use: int
    runnable: int
    limit_reason: CapacityLimitReason | None = None
    blocked_job: str | None = None
    bounds: UnitBounds | None = None
    message: str = ""

    @property
    def changes(self) -> bool:
        """True for RAISE and LOWER."""
        return self.action in (Action.RAISE, Action.LOWER)


@dataclass(frozen=True, slots=True)
class EnvironmentDecision:
    """The decision for one service environment.

    Attributes:
        environment: what ``DescribeServiceEnvironments`` said.
        units: one decision per capacity limit, in the environment's order.
        state: the state to save (clocks advanced; ``last_change_at`` = now when it changes).
        now: the run's time.
    """

    environment: ServiceEnvironment
    units: tuple[UnitDecision, ...]
    state: EnvironmentState
    now: datetime

    @property
    def changes(self) -> bool:
        """True when an ``UpdateServiceEnvironment`` is due."""
        return any(unit.changes for unit in self.units)

    @property
    def capacity_limits(self) -> tuple[CapacityLimit, ...]:
        """The full ``capacityLimits`` to send: every unit, changed or not."""
        return tuple(CapacityLimit(u.unit, u.new_max) for u in self.units)


def _in_cooldown(state: EnvironmentState, cooldown: timedelta, now: datetime) -> bool:
    last = state.last_change_at
    return last is not None and (now < last or now - last < cooldown)


def _prune(
    history: tuple[tuple[datetime, int], ...], now: datetime, window: timedelta, target: int
) -> tuple[tuple[datetime, int], ...]:
    kept = tuple((t, v) for t, v in history if t > now - window and t != now)
    return (*kept, (now, target))


def _raise_reason(current: int, demand: UnitDemand, desired: int, floor: int, bounds: UnitBounds) -> Reason:
    if demand.blocked_need > current:
        return Reason.BLOCKED_JOB
    if floor > current and floor >= desired and floor > bounds.min:
        return Reason.SCHEDULED_FLOOR
    if bounds.min > current and bounds.min >= desired:
        return Reason.MIN_BOUND
    return Reason.DEMAND


def _decide_unit(
    environment: ServiceEnvironment,
    current: int,
    demand: UnitDemand,
    bounds: UnitBounds,
    floor: int,
    policy: PolicyDefaults,
    clock: UnitClock,
    cooldown: bool,
    now: datetime,
) -> tuple[UnitDecision, UnitClock]:
    window = timedelta(minutes=policy.stabilisation_window_minutes)
    demanded = demand.in_use + demand.runnable + policy.headroom
    floor = min(floor, bounds.max)
    desired = max(demanded, bounds.min, floor, demand.blocked_need)
    limit: CapacityLimitReason | None = None
    if demand.blocked_need > bounds.max:
        limit = CapacityLimitReason.BLOCKED_JOB_EXCEEDS_MAX
    elif desired > bounds.max:
        limit = CapacityLimitReason.AT_MAX
    target = min(desired, bounds.max)
    history = _prune(clock.history, now, window, target)
    # Jobs whose payload is not read yet count as 1 instance: demand may be higher, so it is never
    # taken as "below the limit" (no lowering, no stabilisation clock) until they are read.
    below = target < current and not demand.unknown
    below_since = (clock.below_since or now) if below else None
    next_clock = UnitClock(below_since, history)

    def make(
        action: Action, reason: Reason, new_max: int, text: str, limit_reason: CapacityLimitReason | None
    ) -> UnitDecision:
        return UnitDecision(
            unit=demand.unit,
            action=action,
            reason=reason,
            current_max=current,
            new_max=new_max,
            desired=desired,
            target=target,
            in_use=demand.in_use,
            runnable=demand.runnable,
            limit_reason=limit_reason,
            blocked_job=demand.blocked_job,
            bounds=bounds,
            message=text,
        )

    figures = f"{demand.in_use} in use + {demand.runnable} RUNNABLE + {policy.headroom} headroom = {demanded}"
    if limit is CapacityLimitReason.BLOCKED_JOB_EXCEEDS_MAX:
        figures += f"; a blocked job needs {demand.blocked_need}, more than max {bounds.max}"
    elif limit is CapacityLimitReason.AT_MAX:
        figures += f"; capped at max {bounds.max}"
    name = environment.name
    cooling = f"{name} stays at {current} for now: cooldown after the last change; wants {target} ({figures})"

    def hold(reason: Reason, text: str, limit_reason: CapacityLimitReason | None = limit) -> UnitDecision:
        action = Action.HOLD if environment.actionable else Action.LEAVE_ALONE
        return make(action, reason, current, text, limit_reason)

    if not environment.actionable:
        state_text = f"state {environment.state}, status {environment.status}"
        reason_limit = CapacityLimitReason.NOT_VALID if target != current else None
        text = f"{name} left alone at {current} ({state_text}); demand asks for {target} ({figures})"
        return hold(Reason.NOT_VALID, text, reason_limit), next_clock

    if target > current:
        reason = _raise_reason(current, demand, desired, floor, bounds)
        if cooldown:
            return hold(Reason.COOLDOWN, cooling, limit or CapacityLimitReason.COOLDOWN), next_clock
        jump = min(max(bounds.min, floor, demand.blocked_need), bounds.max)
        new = min(target, max(current + policy.max_step, jump))
        step_note = f"; step bound {policy.max_step}" if new < target else ""
        text = f"raised {name} from {current} to {new} ({reason}: {figures}{step_note})"
        return make(Action.RAISE, reason, new, text, limit), next_clock

    if target == current:
        return hold(Reason.STEADY, f"{name} stays at {current} ({figures})"), next_clock

    if not below:
        text = (
            f"{name} stays at {current}: {demand.unknown} RUNNABLE jobs' payloads are not read yet, "
            f"so demand may be higher than {target} ({figures})"
        )
        return hold(Reason.DEMAND_UNKNOWN, text), next_clock

    # target < current: lower only after a full window below, never below in use or outside bounds.
    assert below_since is not None
    floor_in_use = max(target, demand.in_use)
    if floor_in_use >= current or floor_in_use > bounds.max:
        text = f"{name} stays at {current}: {demand.in_use} instances in use ({figures})"
        return hold(Reason.IN_USE, text), next_clock
    if now - below_since < window:
        waited = max(0, int((now - below_since).total_seconds() // 60))
        text = (
            f"{name} stays at {current}: demand below it for {waited} of "
            f"{policy.stabilisation_window_minutes} minutes ({figures})"
        )
        return hold(Reason.STABILISING, text), next_clock
    if cooldown:
        return hold(Reason.COOLDOWN, cooling, limit), next_clock
    peak = max(value for _, value in history)
    new = max(peak, demand.in_use, bounds.min)
    if new >= current:
        text = f"{name} stays at {current}: demand reached {peak} within the window ({figures})"
        return hold(Reason.STABILISING, text), next_clock
    text = (
        f"lowered {name} from {current} to {new} (DEMAND: below the limit for "
        f"{policy.stabilisation_window_minutes}+ minutes, highest target in the window {peak}; {figures})"
    )
    return make(Action.LOWER, Reason.DEMAND, new, text, limit), next_clock


def decide(
    environment: ServiceEnvironment,
    demands: Mapping[str, UnitDemand],
    bounds: Mapping[str, UnitBounds],
    floors: Mapping[str, int],
    policy: PolicyDefaults,
    state: EnvironmentState,
    now: datetime,
) -> EnvironmentDecision:
    """Decide the capacity limits of one service environment.

    Args:
        environment: the environment as described now.
        demands: capacity unit → demand (units missing here count as nothing in use or asked).
        bounds: capacity unit → configured bounds; a unit without bounds is left alone.
        floors: capacity unit → the open scheduled floor at ``now`` (0 or missing: none).
        policy: the environment's effective policy values.
        state: what the previous runs left (clocks, last change).
        now: the run's time (aware); all clocks are measured against it, so a replay of the same
            inputs gives the same decisions.

    Returns:
        The decision, with ``state`` advanced (clocks; ``last_change_at = now`` when it changes).
    """
    cooldown = _in_cooldown(state, timedelta(minutes=policy.cooldown_minutes), now)
    units: list[UnitDecision] = []
    clocks = dict(state.clocks)
    for limit in environment.limits:
        demand = demands.get(limit.unit) or UnitDemand(limit.unit, 0, 0)
        unit_bounds = bounds.get(limit.unit)
        if unit_bounds is None:
            units.append(
                UnitDecision(
                    unit=limit.unit,
                    action=Action.LEAVE_ALONE,
                    reason=Reason.UNMANAGED_UNIT,
                    current_max=limit.max_capacity,
                    new_max=limit.max_capacity,
                    desired=limit.max_capacity,
                    target=limit.max_capacity,
                    in_use=demand.in_use,
                    runnable=demand.runnable,
                    message=f"{environment.name} {limit.unit} has no bounds in the configuration: left alone",
                )
            )
            continue
        decision, clock = _decide_unit(
            environment,
            limit.max_capacity,
            demand,
            unit_bounds,
            floors.get(limit.unit, 0),
            policy,
            clocks.get(limit.unit, UnitClock()),
            cooldown,
            now,
        )
        units.append(decision)
        clocks[limit.unit] = clock
    changes = any(u.changes for u in units)
    next_state = replace(state, clocks=clocks, last_change_at=now if changes else state.last_change_at)
    return EnvironmentDecision(environment, tuple(units), next_state, now)


def _due(previous: Notice | None, key: str, now: datetime, repeat: timedelta) -> bool:
    if previous is None or previous.key != key:
        return True
    return now - previous.at >= repeat


def notices(
    decision: EnvironmentDecision,
    previous: Mapping[str, Notice],
    repeat: timedelta,
    *,
    dry_run: bool = False,
    failed: bool = False,
) -> tuple[list[CapacityAdjusted | CapacityLimited], dict[str, Notice]]:
    """The own events a decision publishes, and the notice memory to save.

    - Every change made is a ``Capacity Adjusted`` (never held back).
    - A change decided in dry-run mode is a ``Capacity Adjusted`` with ``dry_run: true``, and a
      refusal (a limit reason) is a ``Capacity Limited``: both are held back while they say the
      same as the last one published for the unit, until ``repeat`` has passed.
    - ``failed`` (the update call failed): each change becomes a ``Capacity Limited`` with
      ``UPDATE_FAILED`` instead.

    Args:
        decision: from :func:`decide`.
        previous: the notice memory (``EnvironmentState.notices``).
        repeat: how long an unchanged refusal is held back.
        dry_run: no update was made on purpose.
        failed: the update was attempted and failed.
    """
    env = decision.environment
    now = decision.now
    events: list[CapacityAdjusted | CapacityLimited] = []
    memory = dict(previous)
    for unit in decision.units:
        if unit.changes and not failed:
            key = f"{unit.action}:{unit.new_max}"
            slot = f"adjusted:{unit.unit}"
            if not dry_run or _due(memory.get(slot), key, now, repeat):
                events.append(
                    CapacityAdjusted(
                        time=now,
                        service_environment=env.name,
                        service_environment_arn=env.arn,
                        capacity_unit=unit.unit,
                        previous_max=unit.current_max,
                        new_max=unit.new_max,
                        in_use=unit.in_use,
                        runnable_demand=unit.runnable,
                        reason=str(unit.reason),
                        message=("dry run: would have " if dry_run else "") + unit.message,
                        desired=unit.desired,
                        job_arn=unit.blocked_job,
                        dry_run=dry_run,
                    )
                )
                memory[slot] = Notice(key, now)
        limit = CapacityLimitReason.UPDATE_FAILED if unit.changes and failed else unit.limit_reason
        if limit is None:
            continue
        slot = f"limited:{unit.unit}"
        key = f"{limit}:{unit.desired}:{unit.blocked_job or ''}"
        if not _due(memory.get(slot), key, now, repeat):
            continue
        message = unit.message
        if limit is CapacityLimitReason.UPDATE_FAILED:
            message = f"UpdateServiceEnvironment failed; {unit.message}"
        events.append(
            CapacityLimited(
                time=now,
                service_environment=env.name,
                service_environment_arn=env.arn,
                capacity_unit=unit.unit,
                current_max=unit.current_max,
                desired=unit.desired,
                configured_max=unit.bounds.max if unit.bounds else unit.current_max,
                limit_reason=limit,
                message=message,
                job_arn=unit.blocked_job,
                in_use=unit.in_use,
                runnable_demand=unit.runnable,
            )
        )
        memory[slot] = Notice(key, now)
    return events, memory
