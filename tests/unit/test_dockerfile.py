"""deploy/Dockerfile as written: a build stage that installs only locked, hashed
dependencies, and a runtime stage that runs as a user of its own, checks /livez, and
starts the web process as an installed package starts it. tests/deploy builds and runs
the image itself; tests/integration/test_image_commands.py runs its commands."""

from __future__ import annotations

import re

from tests.support.containers import BASE_SUITE
from tests.support.dockerfile import DOCKERFILE, stages
from tests.support.install import ROOT
from tests.support.systemd import UNITS, directives

# The python3 each Debian release ships, by its codename.
DEBIAN_PYTHON = {"bookworm": "3.11", "trixie": "3.13"}
WEB = ["gunicorn", "hooklatch:create_app()", "-c", "python:hooklatch.gunicorn_config"]


def test_the_base_image_is_an_argument_defaulting_to_the_official_python():
    preamble, found = stages()
    args = {
        i.text.partition("=")[0]: i.text.partition("=")[2] for i in preamble if i.keyword == "ARG"
    }
    assert args["PYTHON_IMAGE"] == "python:3.11-slim-bookworm"
    assert [stage.base for stage in found] == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]


def test_the_build_stage_installs_both_lock_files_with_their_hashes():
    build = stages()[1][0]
    runs = " ".join(i.text for i in build.all("RUN"))
    for lock in ("main.txt", "fast.txt"):
        assert (ROOT / "requirements" / lock).exists()
        assert re.search(rf"pip install --require-hashes --no-deps [^&]*-r \S*/{lock}", runs), lock
    # hooklatch itself adds no dependency of its own choosing.
    assert re.search(r"pip install --no-deps /wheels/hooklatch-\*\.whl", runs)


def test_the_runtime_stage_takes_the_virtualenv_and_nothing_to_build_with():
    build, runtime = stages()[1]
    assert build.name == "build"
    copies = [i.text for i in runtime.all("COPY")]
    assert copies == ["--from=build /opt/hooklatch /opt/hooklatch"]
    assert not any("apt-get install" in i.text for i in runtime.all("RUN"))


def test_the_image_runs_as_a_user_that_is_not_root():
    runtime = stages()[1][-1]
    user = runtime.last("USER").text
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, user  # numeric: runAsNonRoot can tell
    assert gid.isdigit() and int(gid) != 0, user
    # Nothing after it runs as root again.
    keywords = [i.keyword for i in runtime.instructions]
    assert "RUN" not in keywords[keywords.index("USER") :]


def test_the_health_check_asks_livez_with_python_alone():
    check = stages()[1][-1].last("HEALTHCHECK")
    command = check.exec_form()
    assert command[:2] == ["python3", "-c"]
    assert "/livez" in command[2]
    assert "curl" not in check.text and "wget" not in check.text


def test_the_default_command_is_the_web_process_the_web_unit_starts():
    command = stages()[1][-1].last("CMD").exec_form()
    assert command == WEB
    unit = directives(UNITS / "hooklatch-web.service")["Service"]["ExecStart"]
    assert unit.replace('"', "").split() == ["/opt/hooklatch/bin/" + WEB[0], *WEB[1:]]


def test_the_tests_build_the_image_on_the_debian_and_python_the_default_names():
    """tests/deploy cannot pull the official image: its base, made of Debian's packages,
    is of the same Debian release, so of the same Python minor version (Debian 12: 3.11)."""
    default = dict(i.text.split("=", 1) for i in stages()[0] if i.keyword == "ARG")
    name, _, tag = default["PYTHON_IMAGE"].partition(":")
    assert name == "python"
    version, _, variant = tag.partition("-")
    assert variant.split("-")[-1] == BASE_SUITE
    assert DEBIAN_PYTHON[BASE_SUITE] == version


def test_every_example_that_runs_a_worker_or_relay_turns_the_web_check_off():
    """The image's HEALTHCHECK asks /livez, which a worker or relay does not serve."""
    examples = [
        line
        for path in (DOCKERFILE, ROOT / "docs" / "deploying-recipes.md")
        for line in path.read_text().splitlines()
        if "docker run" in line and re.search(r"hooklatch (worker|relay)\b", line)
    ]
    assert len(examples) >= 4
    for line in examples:
        assert "--no-healthcheck" in line, line
