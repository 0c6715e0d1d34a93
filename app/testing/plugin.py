"""hooklatch's pytest plugin, which a project enables in its conftest.py with
``pytest_plugins = ["hooklatch.testing.plugin"]`` (or ``-p hooklatch.testing.plugin``):
every ``ProviderConformance`` subclass pytest collects gets one test per check that
applies to it, and a failed check is reported as its name, what was expected and what
came back, without the kit's traceback."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from hooklatch.testing.checks import checks_for
from hooklatch.testing.conformance import ConformanceFailure, ProviderConformance


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "hooklatch_check" not in metafunc.fixturenames:
        return
    description = metafunc.cls
    if description is None or not issubclass(description, ProviderConformance):
        raise pytest.UsageError(
            f"{metafunc.function.__qualname__}: hooklatch_check is given to the tests of "
            "ProviderConformance subclasses only"
        )
    checks = checks_for(description)
    metafunc.parametrize("hooklatch_check", checks, ids=[each.name for each in checks])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if call.excinfo is not None and call.excinfo.errisinstance(ConformanceFailure):
        report.longrepr = str(call.excinfo.value)
    return report
