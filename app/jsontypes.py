"""Types for JSON values: what a provider's body parses to, what an API answers, what a
row's JSON column holds."""

from __future__ import annotations

from typing import TypeAlias

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSON]"
