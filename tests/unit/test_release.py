"""One version, pyproject's: what `hooklatch --version` prints, with a changelog section
for it, under the license the package declares."""

import re
import tomllib
from importlib.metadata import metadata, version

from click.testing import CliRunner

from hooklatch.cli import main
from tests.support.install import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_hooklatch_version_prints_the_installed_distributions_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"hooklatch {version('hooklatch')}\n"


def test_the_installed_distribution_is_pyprojects_version():
    # An install older than pyproject.toml would print another version (`make install-dev`).
    assert version("hooklatch") == PYPROJECT["version"]


def test_the_changelog_has_a_dated_section_for_this_version_first():
    sections = re.findall(
        r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$",
        (ROOT / "CHANGELOG.md").read_text(),
        flags=re.MULTILINE,
    )
    released = [(name, date) for name, date in sections if name != "Unreleased"]
    assert released, sections
    assert released[0][0] == PYPROJECT["version"], (
        f"no changelog section for {PYPROJECT['version']}"
    )
    assert released[0][1], "the section has no date"


def test_the_upgrading_page_has_a_section_for_this_version():
    text = (ROOT / "docs" / "upgrading.md").read_text()
    assert f"\n### {PYPROJECT['version']}\n" in text


def test_the_license_is_apache_2_0_and_declared_so():
    assert (ROOT / "LICENSE").read_text().split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert PYPROJECT["license"] == "Apache-2.0"
    assert metadata("hooklatch")["License-Expression"] == "Apache-2.0"
