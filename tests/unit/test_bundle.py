"""Which template and samples the CLI uses: ./template.yaml, else the checkout's, else the copy a
wheel carries (local/batchpilot_local/bundle.py); with none, a one-line error naming --template.
tests/packaging/test_wheel.py checks the packaged copy from a real install."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from batchpilot_local import bundle
from batchpilot_local.cli import main
from batchpilot_local.template import TemplateError, default_template_path

ROOT = Path(__file__).resolve().parents[2]


def fake_application(folder: Path) -> Path:
    (folder / "functions").mkdir(parents=True)
    (folder / "events").mkdir()
    (folder / "events" / "one.json").write_text("{}")
    (folder / "template.yaml").write_text("Resources: {}\n")
    return folder


def test_in_a_checkout_the_checkouts_own_files_are_used(tmp_path: Path) -> None:
    assert bundle.application_dir() == ROOT
    assert bundle.samples_dir() == ROOT / "events"
    assert default_template_path(cwd=tmp_path) == ROOT / "template.yaml"
    files = bundle.sample_files()
    assert ROOT / "events/batch-job/failed-spot-reclaim.json" in files
    assert all(p.suffix in (".json", ".jsonl") for p in files)
    assert not [p for p in files if "simulate" in p.parts]


def test_a_template_in_the_current_directory_wins(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text("Resources: {}\n")
    assert default_template_path(cwd=tmp_path) == tmp_path / "template.yaml"


def test_outside_a_checkout_the_packaged_copy_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = fake_application(tmp_path / "site-packages" / "batchpilot_local" / "sam_app")
    monkeypatch.setattr(bundle, "CHECKOUT", tmp_path / "lib")
    monkeypatch.setattr(bundle, "PACKAGED", packaged)
    assert bundle.application_dir() == packaged
    assert default_template_path(cwd=tmp_path) == packaged / "template.yaml"
    assert bundle.sample_files() == [packaged / "events" / "one.json"]


def test_with_no_template_anywhere_replay_says_to_pass_template(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bundle, "CHECKOUT", tmp_path / "lib")
    monkeypatch.setattr(bundle, "PACKAGED", tmp_path / "sam_app")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TemplateError, match="pass --template PATH"):
        default_template_path()
    event = tmp_path / "event.json"
    event.write_text((ROOT / "events/batch-job/succeeded.json").read_text())
    for argv in (["replay", str(event)], ["replay", "--samples"], ["samples"]):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
        assert (code, out.getvalue()) == (2, ""), argv
        assert err.getvalue().count("\n") == 1, err.getvalue()
    assert err.getvalue() == "batchpilot samples: no sample events installed with batchpilot\n"
