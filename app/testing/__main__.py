"""``python -m hooklatch.testing TARGET``: run the conformance checks, print each one's
result, and exit 0 when all passed, 1 when one failed, 2 when they could not run.

TARGET is an installed provider's name (``acme``) or a provider class
(``hooklatch_acme:AcmeProvider``), checked with its own ``sample_event`` and ``sign``;
or a ``ProviderConformance`` subclass, by module or file
(``tests/test_conformance.py:TestAcmeConformance``), checked as pytest would check it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from hooklatch.errors import HooklatchError
from hooklatch.providers.base import Provider
from hooklatch.testing.checks import Result, run_checks
from hooklatch.testing.conformance import ProviderConformance, checked, installed
from hooklatch.testing.samples import SampleConformance


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        case, described = conformance_for(args)
    except (HooklatchError, LookupError, ValueError, ImportError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.target}: {described}")
    results = run_checks(case)
    for result in results:
        print(f"  {line(result)}")
    failed = sum(not result.passed for result in results)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m hooklatch.testing",
        description="Run hooklatch's provider conformance checks.",
    )
    parser.add_argument(
        "target",
        help="a provider's name, a provider class (module:Class), or a ProviderConformance "
        "subclass (module:Class or path/to/file.py:Class)",
    )
    parser.add_argument("--secret", help="the endpoint's secret, for a provider's own signing")
    parser.add_argument("--other-secret", help="another secret in the same format")
    parser.add_argument(
        "--option", action="append", default=[], metavar="NAME=VALUE", help="an endpoint option"
    )
    return parser


def conformance_for(args: argparse.Namespace) -> tuple[ProviderConformance, str]:
    """The description to check, and how it signs."""
    target = load(args.target) if ":" in args.target else installed(args.target)
    if isinstance(target, type) and issubclass(target, ProviderConformance):
        return target(), "described by the class, as pytest runs it"
    if isinstance(target, type) and issubclass(target, Provider):
        target = checked(target)
    if not isinstance(target, Provider):
        raise ValueError(f"{args.target} is neither a Provider nor a ProviderConformance class")
    options = dict(option.partition("=")[::2] for option in args.option)
    case = SampleConformance(
        target, secret=args.secret, other_secret=args.other_secret, options=options
    )
    return case, f"provider {target.name!r}, its own sample_event() signed by its own sign()"


def load(target: str) -> object:
    """``module:Class`` or ``path/to/file.py:Class``."""
    module_name, _, qualname = target.partition(":")
    if module_name.endswith(".py"):
        value: object = from_file(module_name)
    else:
        value = importlib.import_module(module_name)
    for attribute in qualname.split("."):
        value = getattr(value, attribute, None)
        if value is None:
            raise LookupError(f"{module_name} has no {qualname}")
    return value


def from_file(path: str) -> ModuleType:
    """A test module by its path, as pytest finds it, whatever packages are installed."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, path)
    if spec is None or spec.loader is None or not Path(path).is_file():
        raise LookupError(f"no Python file {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def line(result: Result) -> str:
    if result.failure is not None:
        return f"FAIL   {result.failure}"
    if result.error is not None:
        return f"ERROR  {result.check}: the check could not run: {result.error}"
    return f"ok     {result.check}"


if __name__ == "__main__":
    sys.exit(main())
