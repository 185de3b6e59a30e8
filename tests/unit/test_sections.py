"""Generated markdown sections: one current table per benchmark, rewritten in place."""

from pathlib import Path

import pytest
from batchpilot_local.testing.sections import read_section, write_section


def test_a_section_is_replaced_in_place_and_others_are_kept(tmp_path: Path) -> None:
    page = tmp_path / "RESULTS.md"
    write_section(page, "a", "first", new_file="# Results\n")
    write_section(page, "b", "| x |\n", new_file="# Results\n")
    write_section(page, "a", "second", new_file="# Results\n")
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# Results\n\n<!-- bench:a:start -->\nsecond\n")
    assert "first" not in text and text.count("bench:a:start") == 1
    assert read_section(page, "b") == "| x |\n"


def test_a_page_whose_section_sits_in_prose_must_already_hold_it(tmp_path: Path) -> None:
    page = tmp_path / "cost.md"
    prose = "Intro.\n\n<!-- bench:cost:start -->\nold\n<!-- bench:cost:end -->\n\nMore.\n"
    page.write_text(prose, encoding="utf-8")
    write_section(page, "cost", "new\n")
    assert page.read_text(encoding="utf-8") == (
        "Intro.\n\n<!-- bench:cost:start -->\nnew\n<!-- bench:cost:end -->\n\nMore.\n"
    )
    with pytest.raises(SystemExit, match="no <!-- bench:other:start -->"):
        write_section(page, "other", "x")
    with pytest.raises(SystemExit, match="no such file"):
        write_section(tmp_path / "missing.md", "cost", "x")
