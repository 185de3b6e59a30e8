"""Where the batchpilot repository is: the directory that holds ``template.yaml`` and ``events/``.

The package may be installed anywhere (an editable install today, a wheel tomorrow), so the root is
never derived from this file's location: it is ``$BATCHPILOT_REPO_ROOT`` when set, otherwise the
first directory from the working directory upwards that looks like the repository.
``tests/conftest.py`` and ``benchmarks/_common.py`` set the variable from their own location, so
that pytest and the benchmarks work from any working directory.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT_ENV = "BATCHPILOT_REPO_ROOT"


class RepoRootNotFound(RuntimeError):
    """The batchpilot repository could not be located (see :func:`repo_root`)."""


def _is_root(path: Path) -> bool:
    return (path / "template.yaml").is_file() and (path / "events").is_dir()


def repo_root(start: Path | None = None) -> Path:
    """The repository root, an absolute path.

    ``$BATCHPILOT_REPO_ROOT`` wins when set (it must hold ``template.yaml`` and ``events/``);
    otherwise ``start`` (default: the working directory) and its parents are tried in turn.

    Raises:
        RepoRootNotFound: the variable points elsewhere, or no directory up from ``start`` holds
            both ``template.yaml`` and ``events/``.
    """
    configured = os.environ.get(ROOT_ENV)
    if configured:
        path = Path(configured).expanduser().resolve()
        if not _is_root(path):
            raise RepoRootNotFound(f"{ROOT_ENV}={configured} does not hold template.yaml and events/")
        return path
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if _is_root(candidate):
            return candidate
    raise RepoRootNotFound(
        f"no directory from {here} upwards holds template.yaml and events/: run from inside the "
        f"batchpilot repository or set {ROOT_ENV} to its root"
    )


ROOT = repo_root()
"""The repository root (resolved once, when this module is first imported)."""
EVENTS_DIR = ROOT / "events"
"""The sample events: ``events/<kind>/<name>.json`` and ``events/scenarios/``."""
TEMPLATE_PATH = ROOT / "template.yaml"
"""The SAM template."""
