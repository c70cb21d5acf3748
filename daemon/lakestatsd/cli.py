"""``lakestatsd`` (and ``python -m lakestatsd``): arguments, config, exit codes.

Exit codes: 0 after a clean stop or ``--check-config``; 2 for a bad configuration (one
line naming the key); 1 when the service cannot start (busy port, failed wiring).
"""

from __future__ import annotations

import argparse
import os
import sys

import structlog

from lakestats.exceptions import ConfigError
from lakestatsd import __version__
from lakestatsd.app import Daemon
from lakestatsd.config import ServiceConfig, load_service_config
from lakestatsd.lifecycle import EXIT_RUNTIME, bind_socket

log = structlog.get_logger("lakestatsd")

EXIT_CONFIG = 2


def _shard_note(config: ServiceConfig) -> str:
    if config.shards.count == 1:
        return ""
    own = config.shard_plan().own
    return f"; shard {config.shards.index} of {config.shards.count} keeps {len(own)}" + (
        f": {', '.join(own)}" if own else ""
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lakestatsd",
        description="Keep lakehouse table statistics fresh: watch, schedule, serve.",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=os.environ.get("LAKESTATS_CONFIG"),
        help="TOML configuration (default: $LAKESTATS_CONFIG; every key can be "
        "overridden by LAKESTATS_<SECTION>__<KEY>)",
    )
    parser.add_argument(
        "--check-config", action="store_true", help="validate the configuration and exit"
    )
    parser.add_argument("--version", action="version", version=f"lakestatsd {__version__}")
    args = parser.parse_args(argv)
    try:
        config = load_service_config(args.config)
    except ConfigError as exc:
        print(f"lakestatsd: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    if args.check_config:
        for warning in config.warnings():
            print(f"lakestatsd: warning: {warning}", file=sys.stderr)
        print(f"lakestatsd: configuration OK ({len(config.table)} tables{_shard_note(config)})")
        return 0
    try:
        sock = bind_socket(config.http.host, config.http.port)
    except OSError as exc:
        print(
            f"lakestatsd: cannot listen on {config.http.listen} (http.listen): "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return EXIT_RUNTIME
    from lakestatsd.logs import configure_logging  # noqa: PLC0415

    configure_logging(config.daemon.log_level)
    for warning in config.warnings():
        log.warning("config_warning", note=warning)
    if not config.table:
        log.warning("no_tables_configured", hint="add [[table]] sections to the config")
    elif config.shards.count > 1:
        own = config.shard_plan().own
        fields = {"index": config.shards.index, "count": config.shards.count}
        if own:
            log.info("shard_tables", **fields, tables=list(own), configured=len(config.table))
        else:  # a valid split (more replicas than tables), but worth a word
            log.warning("shard_has_no_tables", **fields, configured=len(config.table))
    try:
        daemon = Daemon.from_config(config)
    except Exception as exc:  # wiring failed before anything ran: say why, once
        print(f"lakestatsd: cannot start: {type(exc).__name__}: {exc}", file=sys.stderr)
        sock.close()
        return EXIT_RUNTIME
    return daemon.run(sock)
