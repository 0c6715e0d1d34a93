"""Alembic migrations, shipped inside the package so `hooklatch db upgrade` finds them."""

from __future__ import annotations

from pathlib import Path

from alembic.config import Config

HERE = Path(__file__).resolve().parent


def alembic_config(url: str) -> Config:
    config = Config(str(HERE / "alembic.ini"))
    config.set_main_option("script_location", str(HERE))
    # ConfigParser interpolates %: escape it in passwords.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config
