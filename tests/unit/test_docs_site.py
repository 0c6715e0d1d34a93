"""The docs site's build (mkdocs.yml, run by `make docs` in CI) fails on a broken link, a
link to a heading that is not there, and a page left out of the navigation: each is
tried on a small site built with the project's own settings."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.install import ROOT

GOOD = {
    "index.md": "# Home\n\nSee [the guide](guide.md#a-section).\n",
    "guide.md": "# Guide\n\n## A section\n\nText.\n",
}


def build(tmp_path: Path, pages: dict[str, str]) -> subprocess.CompletedProcess[str]:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text)
    config = tmp_path / "mkdocs.yml"
    # The project's settings (strict, validation), with this site's pages and nav.
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\n"
        "docs_dir: docs\n"
        "site_dir: site\n"
        "nav:\n  - index.md\n  - guide.md\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_site_whose_links_and_nav_are_whole_builds(tmp_path):
    result = build(tmp_path, GOOD)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "guide" / "index.html").is_file()


@pytest.mark.parametrize(
    ("pages", "complaint"),
    [
        ({**GOOD, "index.md": "[gone](missing.md)\n"}, "'missing.md', but the target is not found"),
        ({**GOOD, "index.md": "[no](guide.md#nowhere)\n"}, "does not contain an anchor"),
        ({**GOOD, "extra.md": "# Not in nav\n"}, 'not included in the "nav"'),
        ({**GOOD, "index.md": "[out](../README.md)\n"}, "'../README.md', but the target is not"),
    ],
    ids=["broken link", "broken anchor", "page left out of nav", "link out of docs"],
)
def test_the_strict_build_fails_on(tmp_path, pages, complaint):
    result = build(tmp_path, pages)
    assert result.returncode != 0, result.stderr
    assert complaint in result.stderr


RECIPES = {
    "forwarding-http.md": "http_receiver.py",
    "forwarding-nats.md": "nats_consumer.py",
    "forwarding-rabbitmq.md": "rabbitmq_consumer.py",
    "forwarding-redis.md": "redis_consumer.py",
}


@pytest.mark.parametrize(("page", "recipe"), RECIPES.items())
def test_a_forwarding_page_shows_its_consumer_recipe_as_the_file_is(page, recipe):
    """The site has no include: each kind's page carries its recipe, which
    tests/integration/forwarding runs from examples/forwarding/; the two must not drift."""
    text = (ROOT / "docs" / page).read_text()
    shown = text.split(f"`examples/forwarding/{recipe}`:\n\n```python\n", 1)
    assert len(shown) == 2, f"docs/{page} does not show examples/forwarding/{recipe}"
    code = (ROOT / "examples" / "forwarding" / recipe).read_text()
    assert shown[1].split("```\n", 1)[0] == code, (
        f"docs/{page} shows another examples/forwarding/{recipe}: paste the file again"
    )
