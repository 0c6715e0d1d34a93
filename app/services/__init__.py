"""The use cases the operator's faces share, each written once: the CLI, the admin API
and the console parse input, call one of these and render what it returns.

Each function opens its own transaction (``runtime.session_factory``), calls the
domains' functions in it, and does what follows the commit (waking the dispatcher);
the domains' functions take the session first and never commit."""
