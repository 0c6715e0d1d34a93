"""nginx with the repository's deploy/nginx.conf, in a prefix of the test's own."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tests.support.install import ROOT
from tests.support.processes import Proc, free_port, wait_http
from tests.support.tools import needed_tool

CONFIG = ROOT / "deploy" / "nginx.conf"
# What the shipped file says, and what a test puts in its place.
LISTEN = "listen 80;"
UPSTREAM = "server 127.0.0.1:8000;"


def nginx_path() -> str:
    """Debian's nginx (CI installs it); a test without it is skipped, or fails in CI."""
    return needed_tool("nginx", apt="nginx")


def start_nginx(procs: Any, prefix: Path, upstream_port: int) -> tuple[str, Proc]:
    """nginx running deploy/nginx.conf, moved to a free port and to ``upstream_port``;
    returns its base URL. Everything it writes stays under ``prefix``."""
    nginx = nginx_path()
    shipped = CONFIG.read_text()
    assert shipped.count(LISTEN) == 1 and shipped.count(UPSTREAM) == 1, CONFIG
    port = free_port()
    prefix.mkdir(parents=True, exist_ok=True)
    site = prefix / "hooklatch.conf"
    site.write_text(
        shipped.replace(LISTEN, f"listen 127.0.0.1:{port};").replace(
            UPSTREAM, f"server 127.0.0.1:{upstream_port};"
        )
    )
    temp = "\n".join(
        f"    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    # Run as root (CI), nginx's workers would take an unprivileged user that cannot
    # reach the test's folder.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = prefix / "nginx.conf"
    main.write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {prefix / 'nginx.pid'};\n"
        f"error_log {prefix / 'error.log'} warn;\n"
        "events { worker_connections 1024; }\n"
        f"http {{\n    access_log {prefix / 'access.log'};\n{temp}\n    include {site};\n}}\n"
    )
    proc = procs("nginx", [nginx, "-p", str(prefix), "-c", str(main), "-e", "stderr"], {})
    base = f"http://127.0.0.1:{port}"
    wait_http(base + "/healthz", proc)
    return base, proc
