"""The processes that move work out of the web process: the relay and the worker."""
