"""docs/api.md, written from the admin API's description (openapi.json):

    python -m hooklatch.admin.apidocs docs/api.md

Without a path it prints the page. A test fails when the committed page differs from the
one this writes: change the description (or this module), then run the command."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from hooklatch.admin.openapi import load_spec

JSON = dict[str, Any]
BASE = "https://hooks.example.com"
EXAMPLE_PATH = {
    "endpoint": "billing",
    "destination": "warehouse",
    "event_id": "1234",
    "batch_id": "7",
    "secret_ref": "3f9a1c2b7d4e",
    "run_id": "12",
}
INTRO = """\
# Admin API

<!-- Written by `python -m hooklatch.admin.apidocs docs/api.md` from
hooklatch/admin/openapi.json: change the description, then run it again. -->

{description}

The description itself, OpenAPI 3.1, is served at `GET /admin/openapi.json` (behind the
admin token, like every route here) and ships in the package as
`hooklatch/admin/openapi.json`: point a client generator or an API browser at either.
The same changes can be made with the `hooklatch` command and in the console; each writes
the same audit entries whichever way it was made. What replays and bulk replays do is in
[The console and replay](console.md), ordering and blocked keys in
[Ordering](ordering.md#blocked-keys), the lockout after wrong tokens in
[Security](security.md#guessing-the-admin-token); `/metrics`, outside this API, in
[Operating](operating.md#metrics).

## A rotation, with curl

```bash
export HOOKLATCH_ADMIN_TOKEN=...   # as the web process has it
# An endpoint for a GitHub repository: the answer holds the URL to give GitHub, and the
# generated secret, this once.
curl -sS -X POST {base}/admin/endpoints \\
  -H "Authorization: Bearer $HOOKLATCH_ADMIN_TOKEN" -H 'Content-Type: application/json' \\
  -d '{{"provider": "github", "name": "acme-repo"}}'
# Later: a second secret (generated, shown once), given to GitHub; both verify meanwhile.
curl -sS -X POST {base}/admin/endpoints/acme-repo/secrets \\
  -H "Authorization: Bearer $HOOKLATCH_ADMIN_TOKEN"
# Once GitHub signs with the new one (`last_verified_at` of the old one stops moving),
# the old one goes, by its fingerprint.
curl -sS -X DELETE {base}/admin/endpoints/acme-repo/secrets/3f9a1c2b7d4e \\
  -H "Authorization: Bearer $HOOKLATCH_ADMIN_TOKEN"
```

## Errors

Every error is JSON, `{{"error": reason, "message": text}}`, with the status below; each
route lists the reasons it can answer. Besides those:

| Status | Reason | When |
| --- | --- | --- |
| 401 | `unauthorized`, `admin_disabled` | {unauthorized} |
| 429 | `too_many_attempts` | {locked} |
| 400 | `bad_parameter` | A NUL character in the path or a query parameter. |
| 404 | `not_found` | A path that is not a route here. |
| 405 | `method_not_allowed` | A method the route does not answer. |
| 413 | `body_too_large` | A body longer than `HOOKLATCH_MAX_BODY_BYTES`. |
"""


def render(spec: JSON) -> str:
    responses = spec["components"]["responses"]
    parts = [
        INTRO.format(
            description=spec["info"]["description"],
            base=BASE,
            unauthorized=responses["Unauthorized"]["description"],
            locked=responses["TooManyAttempts"]["description"],
        )
    ]
    for tag in spec["tags"]:
        operations = [
            (path, method, op)
            for path, item in spec["paths"].items()
            for method, op in item.items()
            if tag["name"] in op["tags"]
        ]
        parts.append(f"## {tag['name']}\n")
        if "description" in tag:
            parts.append(tag["description"] + "\n")
        parts += [_operation(path, method, op) for path, method, op in operations]
    parts.append("## Schemas\n")
    for name, schema in spec["components"]["schemas"].items():
        parts.append(f"### Schema: {name}\n\n" + _fields(schema))
    return "\n".join(parts).rstrip() + "\n"


def _operation(path: str, method: str, op: JSON) -> str:
    lines = [f"### {op['summary']}\n", f"`{method.upper()} {path}`\n", op["description"] + "\n"]
    parameters = op.get("parameters", [])
    if parameters:
        lines.append("| Parameter | In | Type | Description |\n| --- | --- | --- | --- |")
        lines += [
            f"| `{p['name']}` | {p['in']} | {_type(p['schema'])} | {p['description']} |"
            for p in parameters
        ]
        lines.append("")
    body = op.get("requestBody")
    if body:
        media = body["content"]["application/json"]
        optional = "" if body.get("required") else " (optional: none is an empty object)"
        lines.append(f"Request body, a JSON object{optional}:\n")
        lines.append(_fields(media["schema"]))
    lines.append("| Status | Answer |\n| --- | --- |")
    for status, answer in op["responses"].items():
        if "$ref" in answer:  # 401 and 429, the same everywhere: under Errors above
            continue
        schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
        shape = _shape(schema)
        lines.append(f"| {status} | {_cell(answer['description'])}{' ' + shape if shape else ''} |")
    lines.append("\n" + _curl(path, method, body) + "\n")
    return "\n".join(lines)


def _curl(path: str, method: str, body: JSON | None) -> str:
    url = BASE + re.sub(r"\{([a-z_]+)\}", lambda m: EXAMPLE_PATH[m.group(1)], path)
    command = ["curl -sS"] + ([] if method == "get" else [f"-X {method.upper()}"])
    command.append('-H "Authorization: Bearer $HOOKLATCH_ADMIN_TOKEN"')
    example = body and body["content"]["application/json"].get("example")
    if example:
        command.append("-H 'Content-Type: application/json'")
        command.append(f"-d '{json.dumps(example)}'")
    return "```bash\n" + " \\\n  ".join([*command, f"'{url}'"]) + "\n```"


def _fields(schema: JSON) -> str:
    properties = schema.get("properties", {})
    if not properties:
        return _type(schema) + "\n"
    required = set(schema.get("required", []))
    rows = ["| Field | Type | Required | Description |", "| --- | --- | --- | --- |"]
    for name, field in properties.items():
        described = _cell(field.get("description", ""))
        rows.append(
            f"| `{name}` | {_type(field)} | {'yes' if name in required else ''} | {described} |"
        )
    return "\n".join(rows) + "\n"


def _shape(schema: JSON) -> str:
    """An answer's body: its schema, or the fields of one written in place."""
    if "allOf" in schema:  # an error, whose reasons the description lists
        return _type(schema["allOf"][0])
    properties = schema.get("properties")
    if properties and "$ref" not in schema:
        return "An object: " + ", ".join(f"`{k}` ({_type(v)})" for k, v in properties.items())
    return _type(schema) if schema else ""


def _type(schema: JSON) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#schema-{name.lower()})"
    if "enum" in schema:
        return ", ".join(f"`{v}`" for v in schema["enum"])
    kinds = schema.get("type", "any")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    words = []
    for kind in kinds:
        if kind == "array":
            words.append(f"array of {_type(schema.get('items', {}))}")
        elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
            words.append(f"object of {_type(schema['additionalProperties'])}")
        else:
            words.append(str(schema.get("format", kind)))
    return " or ".join(words)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def main(argv: list[str]) -> None:
    page = render(load_spec())
    if not argv:
        sys.stdout.write(page)
        return
    with open(argv[0], "w", encoding="utf-8") as out:
        out.write(page)


if __name__ == "__main__":
    main(sys.argv[1:])
