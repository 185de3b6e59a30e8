"""Run a scenario file, or two on the same workload (``--compare``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from batchpilot_local.simulate.engine import Simulation
from batchpilot_local.simulate.policies import CapacityPolicyError, RecoverySettingsError
from batchpilot_local.simulate.results import SimulationResult, summarise
from batchpilot_local.simulate.scenario import Scenario, ScenarioError, check_job, load_scenario
from batchpilot_local.simulate.workload import JobSpec, WorkloadJobs, build_jobs

__all__ = ["Run", "run_compare", "run_scenario", "simulate"]


@dataclass
class Run:
    """One finished run: the scenario, the simulation (its trace and totals) and the result."""

    scenario: Scenario
    simulation: Simulation
    result: SimulationResult


def simulate(scenario: Scenario, workload: WorkloadJobs, seed: int) -> Run:
    """Simulate ``scenario`` on ``workload``'s jobs with ``seed``.

    Raises:
        ScenarioError: batchpilot's settings refuse the scenario's ``batchpilot`` section.
    """
    try:
        simulation = Simulation(scenario, workload.jobs, seed)
    except RecoverySettingsError as exc:
        raise ScenarioError(f"batchpilot.recovery.{exc}") from None
    except CapacityPolicyError as exc:
        raise ScenarioError(f"batchpilot.capacity.policy.{exc}") from None
    simulation.run()
    return Run(scenario, simulation, summarise(simulation, workload.history))


def _prepare(path: str | Path, seed: int | None) -> tuple[Scenario, int]:
    scenario = load_scenario(path)
    return scenario, scenario.seed if seed is None else seed


def run_scenario(path: str | Path, seed: int | None = None) -> Run:
    """Load, build the workload of, and simulate one scenario file (``seed`` overrides its own).

    Raises:
        ScenarioError: one line naming the file and the field or record.
    """
    scenario, used_seed = _prepare(path, seed)
    base = Path(path).resolve().parent
    try:
        workload = build_jobs(scenario, used_seed, base)
        if workload.history is not None and workload.history.start is not None:
            # A recorded history runs on its own clock: t = 0 is its first createdAt.
            scenario = scenario.model_copy(update={"start": workload.history.start})
        return simulate(scenario, workload, used_seed)
    except ScenarioError as exc:
        raise ScenarioError(f"{path}: {exc}") from None


def run_compare(path_a: str | Path, path_b: str | Path, seed: int | None = None) -> tuple[Run, Run]:
    """Simulate A and B on A's workload and one seed (A's, unless ``seed`` is given).

    B's own workload section is not used: each of A's jobs goes to the job queue of the same name
    in B (or B's only queue), so the two runs differ only in what B configures.

    Raises:
        ScenarioError: either file is invalid, or A's jobs cannot run in B (the message names B).
    """
    scenario_a, used_seed = _prepare(path_a, seed)
    scenario_b = load_scenario(path_b)
    base_a = Path(path_a).resolve().parent
    try:
        jobs_a = build_jobs(scenario_a, used_seed, base_a)
    except ScenarioError as exc:
        raise ScenarioError(f"{path_a}: {exc}") from None
    if jobs_a.history is not None and jobs_a.history.start is not None:
        # A recorded history runs on its own clock, in both runs.
        scenario_a = scenario_a.model_copy(update={"start": jobs_a.history.start})
        scenario_b = scenario_b.model_copy(update={"start": jobs_a.history.start})
    queues_b = [q.name for q in scenario_b.job_queues]
    moved = [
        job if job.queue in queues_b or len(queues_b) != 1 else _to_queue(job, queues_b[0])
        for job in jobs_a.jobs
    ]
    try:
        for job in moved:
            _check_in(scenario_b, job)
        run_a = simulate(scenario_a, jobs_a, used_seed)
        run_b = simulate(scenario_b, WorkloadJobs(moved, jobs_a.history), used_seed)
    except ScenarioError as exc:
        raise ScenarioError(f"{path_b}: {exc}") from None
    return run_a, run_b


def _to_queue(job: JobSpec, queue: str) -> JobSpec:
    return replace(job, queue=queue)


def _check_in(scenario: Scenario, job: JobSpec) -> None:
    check_job(
        scenario,
        f"job {job.name} of A's workload",
        job.queue,
        job.share,
        job.instance_type,
        job.instance_count,
    )
