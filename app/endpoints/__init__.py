"""Endpoints: the URLs given to providers, and their secrets, encrypted at rest."""
