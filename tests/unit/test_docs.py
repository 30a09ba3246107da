"""The docs stay true: the site builds without a warning, and the Python snippets of its pages and
of the README run.

The ```python snippets of one page run in order in one fresh interpreter, so a snippet may use
what an earlier one on the page defined. The script keeps each snippet on its page's line numbers,
so a traceback points at the page. A snippet that cannot run standalone (it needs a Kafka broker or
a Spark session) is marked on the line before its fence, with the reason:

    <!-- docs-test: skip (needs a Kafka broker) -->
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*\((?P<reason>[^)]+)\)\s*-->")
FENCE = re.compile(r"^```(?P<lang>\S*)\s*$")
SNIPPET_TIMEOUT_S = 120
# Snippets left out are the exception: each needs what a unit test cannot have.
MAX_SKIPPED = 8


@dataclass(frozen=True)
class Snippet:
    page: Path
    first_line: int  # 1-based, the first line of code
    lines: list[str]
    skip_reason: str | None


def snippets(page: Path) -> list[Snippet]:
    found: list[Snippet] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            i += 1
            continue
        start = i + 1
        end = start
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if fence["lang"] == "python":
            before = next((line for line in reversed(lines[:i]) if line.strip()), "")
            marker = SKIP.search(before)
            found.append(Snippet(page, start + 1, lines[start:end], marker["reason"] if marker else None))
        i = end + 1
    return found


def script_of(page: Path) -> str:
    """The page's runnable snippets on their own line numbers, every other line blank."""
    out = [""] * len(page.read_text(encoding="utf-8").splitlines())
    for snippet in snippets(page):
        if snippet.skip_reason is None:
            out[snippet.first_line - 1 : snippet.first_line - 1 + len(snippet.lines)] = snippet.lines
    return "\n".join(out) + "\n"


PAGES_WITH_CODE = [p for p in PAGES if any(s.skip_reason is None for s in snippets(p))]


def test_the_docs_site_builds_without_warnings(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(REPO / "mkdocs.yml"),
            "-d",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, (
        "mkdocs build --strict failed (mkdocs comes with pip install -e '.[test]'):\n"
        + result.stdout[-3000:]
        + result.stderr[-3000:]
    )
    assert (tmp_path / "index.html").exists()


@pytest.mark.parametrize("page", PAGES_WITH_CODE, ids=lambda p: str(p.relative_to(REPO)))
def test_the_python_snippets_of_a_page_run(page: Path, tmp_path: Path) -> None:
    script = tmp_path / f"{page.name}.py"
    script.write_text(script_of(page), encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        # The default state.dir is under the temporary directory: one of the test's own.
        "TMPDIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=SNIPPET_TIMEOUT_S,
        cwd=tmp_path,
        env=env,
    )
    assert result.returncode == 0, (
        f"A Python snippet of {page.relative_to(REPO)} failed (line numbers are the page's):\n"
        + result.stderr[-4000:]
    )


def test_snippets_left_out_say_why_and_are_few() -> None:
    skipped = [s for p in PAGES for s in snippets(p) if s.skip_reason is not None]
    assert all(s.skip_reason and s.skip_reason.strip() for s in skipped)
    assert len(skipped) <= MAX_SKIPPED, [f"{s.page.name}:{s.first_line}" for s in skipped]
    for page in PAGES:
        text = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(text, 1):
            if SKIP.search(line):
                following = next((x for x in text[number:] if x.strip()), "")
                assert following.strip() == "```python", (
                    f"{page.name}:{number}: a docs-test marker must stand right before a ```python fence"
                )


def test_every_docs_page_is_in_the_site() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p.name for p in (REPO / "docs").glob("*.md") if f" {p.name}" not in nav]
    assert not missing, f"pages missing from mkdocs.yml's nav: {missing}"
