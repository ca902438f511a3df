"""The docs the code points to exist, and the README's links resolve (mkdocs build --strict checks the site's own)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ALGOS = sorted((ROOT / "algos").glob("*.py"))


@pytest.mark.parametrize("path", ALGOS, ids=[p.stem for p in ALGOS])
def test_each_algorithm_file_names_its_existing_page(path):
    first = path.read_text().splitlines()[0]
    assert first == f"# docs: docs/algorithms/{path.stem}.md"
    assert (ROOT / "docs" / "algorithms" / f"{path.stem}.md").is_file()


def test_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    targets = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [t.split("#")[0] for t in targets if not re.match(r"[a-z]+://", t)]
    assert len(local) >= 10  # the file table links every page
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing


def test_every_algorithm_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in ALGOS:
        assert f"algorithms/{path.stem}.md" in nav
