"""The docs the code points to exist, and the README's links resolve (mkdocs build --strict checks the site's own)."""

import re
import subprocess
import sys
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
    # an anchor into a page names one of its headings, as the site's slugs make them (lower case, no punctuation,
    # hyphens for spaces); the site's own links are checked by mkdocs --strict, the README is not in the site
    anchored = [t.split("#") for t in targets if "#" in t and not re.match(r"[a-z]+://", t)]
    assert anchored
    for page, anchor in anchored:
        headings = re.findall(r"^#+\s+(.*)$", (ROOT / page).read_text(), flags=re.M)
        slugs = [re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.strip().lower())) for h in headings]
        assert anchor in slugs, f"{page}#{anchor}"


def test_every_algorithm_page_is_in_the_site_nav():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in ALGOS:
        assert f"algorithms/{path.stem}.md" in nav


def test_every_study_page_is_in_the_site_nav_and_on_its_home_page():
    """A study's page (a results folder's README.md) is found from the site's menu and from the home's list."""
    nav, home = (ROOT / "mkdocs.yml").read_text(), (ROOT / "docs" / "index.md").read_text()
    pages = [f"results/{path.parent.name}/README.md" for path in sorted((ROOT / "docs/results").glob("*/README.md"))]
    assert len(pages) >= 20
    assert not [page for page in pages if page not in nav]
    assert not [page for page in pages if f"]({page})" not in home]


def test_the_tree_is_formatted():
    """`ruff format .` (settings in pyproject.toml) leaves every file as it is."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "."], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_contributing_page_shows_the_sizes_the_tool_measures():
    """docs/contributing.md's size table is `python -m common.sizes`' output for this tree."""
    from common.sizes import markdown, size_rows

    page = (ROOT / "docs" / "contributing.md").read_text()
    table = page.split("<!-- sizes:begin -->\n")[1].split("\n<!-- sizes:end -->")[0]
    assert table == markdown(size_rows())


def test_the_contributing_page_shows_where_ppo_py_s_lines_go(tmp_path):
    """Its parts table is `python -m common.sizes --parts`' output; the parts of a small file, counted by hand: each
    from the line after the previous part's last (blank lines and comments before a definition are its own)."""
    from common.sizes import part_rows, parts_markdown

    page = (ROOT / "docs" / "contributing.md").read_text()
    table = page.split("<!-- parts:begin -->\n")[1].split("\n<!-- parts:end -->")[0]
    assert table == parts_markdown(part_rows())
    small = tmp_path / "small.py"
    small.write_text(
        '"""doc"""\nimport os\nimport sys  # 3\n\nX = 1\nY: int = 2\n\n\ndef f():\n    return X  # 10\n'
        '# about the main block\nif __name__ == "__main__":\n    f()\n\nif os.sep:\n    g = 0  # 16\n\n'
    )
    assert part_rows(small) == [
        dict(part="imports", lines=3),
        dict(part="X", lines=2),
        dict(part="Y", lines=1),
        dict(part="f", lines=4),
        dict(part="main block", lines=3),
        dict(part="if os.sep:", lines=4),  # with the blank line after it
    ]
    assert sum(row["lines"] for row in part_rows()) == len((ROOT / "algos" / "ppo.py").read_text().splitlines())
    small.write_text("x = 1\ny = 2")  # a last line without its newline counts
    assert part_rows(small) == [dict(part="x", lines=1), dict(part="y", lines=1)]
    small.write_text("# nothing defined\n")
    assert part_rows(small) == []
