"""What hooklatch declares it needs leaves out the releases with published advisories, and
what make (and so CI) installs comes from lock files with hashes that meet it."""

import re
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.support.install import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
DECLARED = {
    canonicalize_name(requirement.name): requirement
    for requirement in map(Requirement, PYPROJECT["project"]["dependencies"])
}
LOCKS = ("main", "dev", "bench", "fast")

# Releases an install must never resolve to: each has a published advisory.
ADVISED_AGAINST = {
    "gunicorn": ["21.2.0", "22.0.0"],  # request smuggling
    "cryptography": ["42.0.0", "42.0.3", "44.0.0"],  # NULL dereference; its bundled OpenSSL
    "werkzeug": ["3.0.0", "3.1.5"],
    "flask": ["3.1.0"],
    "jinja2": ["3.1.5"],
}


def pinned(lock: str) -> dict[str, tuple[Version, list[str]]]:
    """Each package the lock file pins, with its version and hashes."""
    text = (ROOT / "requirements" / f"{lock}.txt").read_text()
    entries: dict[str, tuple[Version, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", text):
        match = re.match(r"([A-Za-z0-9._-]+)==(\S+)", block)
        if match:
            entries[canonicalize_name(match[1])] = (
                Version(match[2]),
                re.findall(r"--hash=sha256:([0-9a-f]{64})", block),
            )
    return entries


@pytest.mark.parametrize("package", sorted(ADVISED_AGAINST))
def test_the_declared_floors_exclude_releases_with_advisories(package):
    requirement = DECLARED[package]
    admitted = [v for v in ADVISED_AGAINST[package] if requirement.specifier.contains(v)]
    assert admitted == [], f"{requirement} admits {admitted}"


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_is_pinned_with_hashes(lock):
    entries = pinned(lock)
    assert entries
    assert [name for name, (_, hashes) in entries.items() if not hashes] == []


@pytest.mark.parametrize("lock", ["main", "dev", "bench"])
def test_each_lock_pins_every_declared_dependency_at_a_release_it_admits(lock):
    entries = pinned(lock)
    for name, requirement in DECLARED.items():
        assert name in entries, f"{lock}.txt does not pin {name}"
        version, _ = entries[name]
        assert requirement.specifier.contains(version), f"{lock}.txt: {name} {version}"


def test_make_installs_every_lock_with_required_hashes():
    makefile = (ROOT / "Makefile").read_text()
    hashed = re.search(r"^HASHED := (.*)$", makefile, re.M)
    fast = re.search(r"^FAST := (.*)$", makefile, re.M)
    assert hashed and "--require-hashes" in hashed[1]
    assert fast and "--require-hashes" in fast[1] and "requirements/fast.txt" in fast[1]
    assert "pip install $(HASHED) requirements/$(1).txt" in makefile  # define install_from
    for lock in ("main", "dev", "bench"):
        assert f"$(call install_from,{lock})" in makefile


@pytest.mark.parametrize("lock", ["main", "dev"])
def test_a_lock_holds_what_its_packages_ask_for_on_the_oldest_python_hooklatch_runs_on(lock):
    """pip-compile evaluates markers on the Python it runs on, so a requirement that only
    an older Python has (redis's async-timeout below 3.11.3) would be missing from a lock
    made on a newer one, and a hashed install on Python 3.11.0 to 3.11.2 would lack it."""
    from importlib.metadata import PackageNotFoundError, requires

    oldest = {"python_version": "3.11", "python_full_version": "3.11.0", "extra": ""}
    locked = pinned(lock)
    missing = []
    for name in locked:
        try:
            wanted = requires(name) or []
        except PackageNotFoundError:  # locked for another platform or extra than this one
            continue
        for requirement in map(Requirement, wanted):
            if (
                requirement.marker is not None
                and "extra" not in str(requirement.marker)
                and requirement.marker.evaluate(oldest)
                and canonicalize_name(requirement.name) not in locked
            ):
                missing.append(f"{name} needs {requirement}")
    assert not missing, f"name them in requirements/markers.in and run make lock: {missing}"
