"""Holding the admin API to its description (hooklatch/admin/openapi.json): the routes
Flask serves, and every answer a test gets through ``DescribedClient`` checked against
the schema the description gives for its path, method and status."""

from __future__ import annotations

import re
from typing import Any

from flask import Flask
from jsonschema import Draft202012Validator

from hooklatch.admin.openapi import load_spec

METHODS = ("get", "put", "post", "delete", "patch")
CONVERTER = re.compile(r"<(?:[a-z]+:)?([a-z_]+)>")


def served_routes(app: Flask) -> set[tuple[str, str]]:
    """(path, method) of each admin API route Flask serves, written as OpenAPI writes
    paths (``/admin/events/{event_id}``); the console's pages are not the API."""
    routes = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/admin/") or rule.rule.startswith("/admin/console"):
            continue
        path = CONVERTER.sub(r"{\1}", rule.rule)
        routes |= {(path, m.lower()) for m in rule.methods or () if m not in ("HEAD", "OPTIONS")}
    return routes


def described_routes(spec: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (path, method)
        for path, item in spec["paths"].items()
        for method in item
        if method in METHODS
    }


def _template(spec: dict[str, Any], path: str, method: str) -> str:
    """The described path that ``path`` is an instance of."""
    for template, item in spec["paths"].items():
        pattern = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(template))
        if method in item and re.fullmatch(pattern, path):
            return template
    raise AssertionError(f"{method.upper()} {path} is not in the description")


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = _at(spec, node["$ref"])
    return node


def _at(spec: dict[str, Any], pointer: str) -> dict[str, Any]:
    node: Any = spec
    for part in pointer.removeprefix("#/").split("/"):
        node = node[part]
    result: dict[str, Any] = node
    return result


class Described:
    """The description, and the operations whose answers were checked against it."""

    def __init__(self) -> None:
        self.spec = load_spec()
        self.checked: set[tuple[str, str, int]] = set()

    def check(self, method: str, path: str, status: int, body: Any) -> None:
        """``body`` must be what the description says ``method path`` answers with
        ``status``; and the status must be one it names."""
        method = method.lower()
        template = _template(self.spec, path.split("?")[0], method)
        responses = self.spec["paths"][template][method]["responses"]
        assert str(status) in responses, f"{method.upper()} {template} answered {status}: {body}"
        answer = _resolve(self.spec, responses[str(status)])
        schema = answer["content"]["application/json"]["schema"]
        validator = Draft202012Validator(
            {**schema, "components": self.spec["components"]},
            format_checker=Draft202012Validator.FORMAT_CHECKER,
        )
        problems = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not problems, f"{method.upper()} {template} {status}: {problems}"
        self.checked.add((template, method, status))


class DescribedClient:
    """A Flask test client whose admin API answers are each checked against the
    description (``Described.check``); it sends the admin token unless told otherwise."""

    def __init__(self, client: Any, described: Described, headers: dict[str, str]) -> None:
        self.client = client
        self.described = described
        self.headers = headers

    def open(self, method: str, path: str, **kwargs: Any) -> Any:
        headers = {**self.headers, **kwargs.pop("headers", {})}
        answer = self.client.open(path, method=method.upper(), headers=headers, **kwargs)
        self.described.check(method, path, answer.status_code, answer.get_json(silent=True))
        return answer

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.open("get", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.open("post", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> Any:
        return self.open("put", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.open("delete", path, **kwargs)
