"""Where the CLI finds the SAM application's files: ``template.yaml``, ``samconfig.toml``, the
functions' code (``functions/<name>/app.py``, which the replay imports) and the sample events
(``events/``).

Two places, in this order:

* the checkout this package runs from (``<repo>/local/batchpilot_local``: the editable install
  ``make`` creates), so a change to the template or a function is replayed as it stands;
* the copy a wheel carries as package data, ``batchpilot_local/sam_app/`` (pyproject.toml,
  ``[tool.hatch.build.targets.wheel.force-include]``): ``pip install`` / ``pipx install`` of the
  wheel gives a working ``batchpilot replay`` anywhere.

The replay's own rule comes first: a ``template.yaml`` in the current directory wins over both
(:func:`batchpilot_local.template.default_template_path`), and ``--template`` over everything.

Standard library only: the CLI imports this before any subcommand runs.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["CHECKOUT", "PACKAGED", "application_dir", "sample_files", "samples_dir"]

PACKAGED = Path(__file__).resolve().parent / "sam_app"
"""The copy of the application a wheel carries (absent in a checkout)."""
CHECKOUT = Path(__file__).resolve().parents[2]
"""The repository root when this package runs from a checkout (otherwise some other folder)."""


def _is_application(folder: Path) -> bool:
    return (folder / "template.yaml").is_file() and (folder / "functions").is_dir()


def application_dir() -> Path | None:
    """The folder holding ``template.yaml``, ``functions/`` and ``events/``: the checkout's, else
    the packaged copy; None when neither is there (a broken install)."""
    for folder in (CHECKOUT, PACKAGED):
        if _is_application(folder):
            return folder
    return None


def samples_dir() -> Path | None:
    """The sample events folder (``events/``) of :func:`application_dir`; None without one."""
    folder = application_dir()
    if folder is None or not (folder / "events").is_dir():
        return None
    return folder / "events"


def sample_files() -> list[Path]:
    """Every file ``batchpilot replay`` reads from the samples folder (``.json`` and ``.jsonl``:
    events and scenarios, as a directory input is read), sorted; empty without a samples folder.
    ``events/simulate/`` holds ``batchpilot simulate``'s YAML scenarios, which are not listed."""
    folder = samples_dir()
    if folder is None:
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
