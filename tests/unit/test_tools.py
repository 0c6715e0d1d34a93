"""A program the suite needs and cannot find skips its tests outside CI and fails them in
CI, saying which package to install."""

import sys
from pathlib import Path

import pytest

from tests.support.tools import in_ci, needed_tool

ABSENT = "hooklatch-absent-tool"


def test_a_missing_tool_skips_the_test_outside_ci_naming_its_package(tmp_path):
    with pytest.raises(pytest.skip.Exception, match=r"apt-get install hooklatch-tools"):
        needed_tool(ABSENT, apt="hooklatch-tools", environ={"PATH": str(tmp_path)})


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_missing_tool_fails_the_test_in_ci(tmp_path, ci):
    with pytest.raises(pytest.fail.Exception, match=r"apt-get install hooklatch-tools"):
        needed_tool(ABSENT, apt="hooklatch-tools", environ={"PATH": str(tmp_path), "CI": ci})


@pytest.mark.parametrize("ci", ["", "false", "0"])
def test_ci_set_to_false_is_not_ci(ci):
    assert not in_ci({"CI": ci})


def test_a_tool_on_the_path_is_found_under_its_first_name_present(tmp_path):
    program = tmp_path / "chromium-browser"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    environ = {"PATH": str(tmp_path), "CI": "true"}
    assert needed_tool("chromium", "chromium-browser", apt="chromium", environ=environ) == str(
        program
    )


def test_a_tool_installed_in_this_virtualenv_is_found_off_the_path(tmp_path):
    """podman-compose comes from PyPI into the virtualenv, whose bin may not be on PATH."""
    found = needed_tool("pytest", install="pip install pytest", environ={"PATH": str(tmp_path)})
    assert found == str(Path(sys.executable).parent / "pytest")


def test_a_missing_tool_says_how_to_install_what_debian_does_not_package(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"\(make test-deploy installs it\)"):
        needed_tool(
            ABSENT,
            install="make test-deploy installs it",
            environ={"PATH": str(tmp_path), "CI": "true"},
        )
