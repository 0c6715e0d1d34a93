"""`python -m workers worker|relay` is `hooklatch worker|relay`."""

import sys

from app.cli import main

if __name__ == "__main__":
    main(args=sys.argv[1:] or ["--help"])
