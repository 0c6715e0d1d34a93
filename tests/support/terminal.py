"""A command run on a pseudo-terminal, as a person runs it: its prompts are answered as
they appear, and it sees a terminal on stdin (``isatty``)."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import time
from collections.abc import Mapping, Sequence


def run_in_terminal(
    args: Sequence[str],
    env: Mapping[str, str],
    answers: Sequence[tuple[str, str]],
    *,
    timeout: float = 60.0,
) -> tuple[int, str]:
    """Run ``args`` on a terminal; when the output shows each prompt of ``answers`` in
    turn, type its answer and Enter. Returns the exit code and everything it printed."""
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        list(args), stdin=terminal, stdout=terminal, stderr=terminal, env=dict(env)
    )
    os.close(terminal)
    output, seen, pending = b"", 0, list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([controller], [], [], 0.1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # EIO: the command exited and closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if pending and pending[0][0].encode() in output[seen:]:
                seen = len(output)
                os.write(controller, pending.pop(0)[1].encode() + b"\n")
        else:
            proc.kill()
            raise AssertionError(f"{args} did not end within {timeout} s:\n{output.decode()}")
        return proc.wait(timeout=timeout), output.decode(errors="replace")
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
