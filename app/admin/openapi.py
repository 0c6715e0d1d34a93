"""The admin API's description, OpenAPI 3.1: openapi.json beside this module, served at
GET /admin/openapi.json behind the admin token like every other /admin route (the same
file is in the package and rendered as docs/api.md, so it hides nothing; serving it
openly would make /admin the one prefix with an exception to the token). Tests hold it to
the routes Flask serves and to the bodies they answer."""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any

from flask import current_app
from flask.typing import ResponseReturnValue

from hooklatch.admin.blueprint import bp

SPEC_FILE = "openapi.json"


@cache
def spec_text() -> str:
    return files("hooklatch.admin").joinpath(SPEC_FILE).read_text(encoding="utf-8")


def load_spec() -> dict[str, Any]:
    spec: dict[str, Any] = json.loads(spec_text())
    return spec


@bp.get("/openapi.json")
def openapi() -> ResponseReturnValue:
    return current_app.response_class(spec_text(), mimetype="application/json")
