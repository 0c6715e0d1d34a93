"""The console's blueprint, on which its modules register their views and hooks."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint(
    "console",
    __name__,
    url_prefix="/admin/console",
    template_folder="../templates",
    static_folder="../static",
    static_url_path="/static",
)
