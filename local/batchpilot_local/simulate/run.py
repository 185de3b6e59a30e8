"""Run a scenario file, or two on the same workload (``--compare``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from batchpilot_local.simulate.engine import Simulation
from batchpilot_local.simulate.policies import CapacityPolicyError, RecoverySettingsError
from batchpilot_local.simulate.results import SimulationResult, summarise
from batchpilot_local.simulate.scenario import Scenario, ScenarioError, check_job, load_scenario
from batchpilot_local.simulate.workload import ElasticStream, JobSpec, WorkloadJobs, build_jobs

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
        simulation = Simulation(scenario, workload.jobs, seed, workload.elastic)
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


def run_compare(path_a: str | Path, *paths: str | Path, seed: int | None = None) -> tuple[Run, ...]:
    """Simulate A and every other scenario on A's workload and one seed (A's, unless ``seed`` is
    given); returns the runs in the order given (A first).

    The other files' own workload sections are not used: each of A's jobs goes to the job queue of
    the same name in that scenario (or its only queue), so the runs differ only in what each
    scenario configures.

    Raises:
        ScenarioError: a file is invalid, or A's jobs cannot run in another scenario (the message
            names that file).
    """
    scenario_a, used_seed = _prepare(path_a, seed)
    others = [(path, load_scenario(path)) for path in paths]
    base_a = Path(path_a).resolve().parent
    try:
        jobs_a = build_jobs(scenario_a, used_seed, base_a)
    except ScenarioError as exc:
        raise ScenarioError(f"{path_a}: {exc}") from None
    if jobs_a.history is not None and jobs_a.history.start is not None:
        # A recorded history runs on its own clock, in every run.
        scenario_a = scenario_a.model_copy(update={"start": jobs_a.history.start})
        others = [(p, s.model_copy(update={"start": jobs_a.history.start})) for p, s in others]
    planned: list[tuple[str | Path, Scenario, WorkloadJobs]] = []
    for path, scenario in others:
        queues = [q.name for q in scenario.job_queues]
        moved = [
            job if job.queue in queues or len(queues) != 1 else _to_queue(job, queues[0])
            for job in jobs_a.jobs
        ]
        elastic = [
            stream if stream.queue in queues or len(queues) != 1 else replace(stream, queue=queues[0])
            for stream in jobs_a.elastic
        ]
        try:
            for job in moved:
                _check_in(scenario, job)
            for stream in elastic:
                _check_stream_in(scenario, stream)
        except ScenarioError as exc:
            raise ScenarioError(f"{path}: {exc}") from None
        planned.append((path, scenario, WorkloadJobs(moved, jobs_a.history, elastic)))
    try:
        runs = [simulate(scenario_a, jobs_a, used_seed)]
    except ScenarioError as exc:
        raise ScenarioError(f"{path_a}: {exc}") from None
    for path, scenario, workload in planned:
        try:
            runs.append(simulate(scenario, workload, used_seed))
        except ScenarioError as exc:
            raise ScenarioError(f"{path}: {exc}") from None
    return tuple(runs)


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


def _check_stream_in(scenario: Scenario, stream: ElasticStream) -> None:
    _, largest = stream.stream.instance_count.bounds()
    check_job(
        scenario,
        f"elastic stream {stream.stream.share} of A's workload",
        stream.queue,
        stream.stream.share,
        stream.stream.instance_type,
        largest,
    )
