"""The admin API (events, their attempts, replays, endpoints, their secrets and their
provider's side, ordering) behind a bearer token, described by openapi.json; and the
console (hooklatch.admin.console)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flask import Flask


def init_api(app: Flask) -> None:
    """Serve the admin API under /admin on ``app``."""
    # Imported for the routes they register on the blueprint.
    from hooklatch.admin import destinations, endpoints, openapi, provider_side, views  # noqa: F401
    from hooklatch.admin.blueprint import bp

    app.register_blueprint(bp)
