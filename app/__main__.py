"""`python -m hooklatch ...` is the `hooklatch` command."""

from hooklatch.cli import main

main()
