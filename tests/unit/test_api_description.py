"""The admin API's description is valid OpenAPI 3.1, ships in the package, and docs/api.md
is the page written from it."""

import subprocess
import sys
import tomllib

import pytest
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from hooklatch.admin.apidocs import render
from hooklatch.admin.openapi import SPEC_FILE, load_spec
from tests.support.install import ROOT

PAGE = ROOT / "docs" / "api.md"


def test_the_description_is_valid_openapi_3_1():
    spec = load_spec()

    validate(spec)

    assert spec["openapi"].startswith("3.1.")


def test_the_validator_refuses_a_broken_description():
    """The check above can fail: a path whose parameter is not declared is not OpenAPI."""
    spec = load_spec()
    del spec["paths"]["/admin/events/{event_id}"]["get"]["parameters"]

    with pytest.raises(OpenAPIValidationError):
        validate(spec)


def test_the_description_ships_in_the_package():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert SPEC_FILE in data["package-data"]["hooklatch.admin"]


def test_every_operation_has_a_summary_a_description_and_an_id():
    operations = [op for item in load_spec()["paths"].values() for op in item.values()]
    ids = [op["operationId"] for op in operations]
    assert len(set(ids)) == len(ids)
    assert all(op["summary"] and op["description"] and op["tags"] for op in operations)


def test_docs_api_md_is_the_page_written_from_the_description():
    assert PAGE.read_text() == render(load_spec()), (
        "docs/api.md differs from the description: run "
        "`python -m hooklatch.admin.apidocs docs/api.md`"
    )


def test_the_page_is_written_by_python_dash_m(tmp_path):
    written = tmp_path / "api.md"
    subprocess.run(
        [sys.executable, "-m", "hooklatch.admin.apidocs", str(written)], check=True, cwd=tmp_path
    )
    assert written.read_text() == PAGE.read_text()
