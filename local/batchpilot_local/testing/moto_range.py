"""The moto releases the embedded AWS is checked against: the range pyproject.toml states."""

from __future__ import annotations


def moto_outside_range() -> str | None:
    """Why the installed moto is not one the project supports, or None when it is: the range is
    the moto requirement of pyproject.toml (as the installed ``batchpilot`` distribution states
    it), read by ``packaging``'s requirement parser."""
    from importlib import metadata

    from packaging.requirements import Requirement

    requirement = next(
        Requirement(text)
        for text in metadata.requires("batchpilot") or []
        if Requirement(text).name == "moto" and not Requirement(text).marker
    )
    installed = metadata.version("moto")
    if requirement.specifier.contains(installed, prereleases=True):
        return None
    return (
        f"moto {installed} is installed, but batchpilot supports moto{requirement.specifier} "
        f"(pyproject.toml): the embedded AWS is only checked within that range. Reinstall the venv "
        f"(`make clean test`) or `pip install 'moto{requirement.specifier}'`; to try another moto on "
        f"purpose, widen the range in pyproject.toml and run `make test-moto-latest`."
    )
