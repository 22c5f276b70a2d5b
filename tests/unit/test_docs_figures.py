"""``python -m benchmarks docs``: the docs' results blocks are filled from the results files,
and the repository's docs match its results files now (a benchmark rerun without
regenerating its docs fails here)."""

import os

import pytest

from benchmarks import docs_figures

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_a_block_is_filled_from_its_results_file_less_its_title(tmp_path):
    (tmp_path / "x.md").write_text("# Title\n\nintro\n\n| a |\n|---|\n| 1 |\n")
    doc = "before\n<!-- results: x.md -->\nstale 0.5 ms\n<!-- /results -->\nafter\n"
    got = docs_figures.render(doc, str(tmp_path))
    assert got == "before\n<!-- results: x.md -->\nintro\n\n| a |\n|---|\n| 1 |\n" \
                  "<!-- /results -->\nafter\n"
    assert docs_figures.render(got, str(tmp_path)) == got  # once filled, it stays
    assert docs_figures.render("no blocks\n", str(tmp_path)) == "no blocks\n"


def test_a_block_naming_a_missing_results_file_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^results: gone\.md is not in"):
        docs_figures.render("<!-- results: gone.md -->\n<!-- /results -->\n", str(tmp_path))


def test_the_docs_match_the_results_files():
    stale = docs_figures.update(ROOT, os.path.join(ROOT, "benchmarks", "results"), check=True)
    assert stale == [], f"run `python -m benchmarks docs`: {stale} differ from their results"
