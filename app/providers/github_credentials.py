"""A credential for GitHub's API: a token, or a GitHub App's id, private key and
installation id, with which hooklatch asks for an installation token (an hour's)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import jwt
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from hooklatch.providers.remote import credential_text

TOKEN = frozenset({"token"})
APP = frozenset({"app_id", "private_key", "installation_id"})
CREDENTIAL_FIELDS = {
    "token": "a token that can read and write the hooks of the repository or organisation: "
    'fine-grained with the "Webhooks" permission (read and write), or classic with '
    "admin:repo_hook (a repository) or admin:org_hook (an organisation); or, instead of "
    "it, a GitHub App's three fields",
    "app_id": "a GitHub App's id (or client id), for an App installed on the repository or "
    'organisation with the "Webhooks" permission (read and write)',
    "private_key": "the GitHub App's private key, as GitHub gave it (PEM)",
    "installation_id": "the id of the App's installation on the repository's owner or the "
    "organisation",
}
# The JWT that asks for an installation token is dated a minute back, for a clock behind
# GitHub's, and lives 9 minutes after (GitHub takes 10 at most).
JWT_BACKDATE = timedelta(minutes=1)
JWT_LIFE = timedelta(minutes=9)


def check_credentials(values: Mapping[str, str]) -> dict[str, str]:
    """A token alone, or a GitHub App's id, private key and installation id; ValueError
    naming fields, never a value."""
    fields = frozenset(values)
    if fields not in (TOKEN, APP):
        raise ValueError(
            f"github credentials are 'token', or 'app_id', 'private_key' and "
            f"'installation_id'; got {credential_text(values)}"
        )
    empty = sorted(name for name in fields if not values[name].strip())
    if empty:
        raise ValueError(f"github credentials need {empty[0]!r}")
    if fields == APP:
        if not values["installation_id"].isascii() or not values["installation_id"].isdigit():
            raise ValueError("github credentials' 'installation_id' must be a number")
        _private_key(values["private_key"])
    return dict(values)


def _private_key(pem: str) -> RSAPrivateKey:
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        key = None
    if not isinstance(key, RSAPrivateKey):
        raise ValueError("github credentials' 'private_key' is not an RSA private key (PEM)")
    return key


def app_jwt(credentials: Mapping[str, str], *, now: datetime) -> str:
    """The JWT a GitHub App signs (RS256) to ask for an installation token."""
    claims = {
        "iat": int((now - JWT_BACKDATE).timestamp()),
        "exp": int((now + JWT_LIFE).timestamp()),
        "iss": credentials["app_id"],
    }
    return jwt.encode(claims, _private_key(credentials["private_key"]), algorithm="RS256")
