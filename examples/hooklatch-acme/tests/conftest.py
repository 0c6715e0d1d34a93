"""hooklatch's pytest plugin makes a test of each conformance check (docs/plugins.md,
"The conformance kit"). Installing hooklatch does not enable it: a project's tests do."""

pytest_plugins = ["hooklatch.testing.plugin"]
