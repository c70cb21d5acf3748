"""structlog JSON lines on stdout, with the stdlib loggers (uvicorn, apscheduler, py4j) and
Python warnings routed through the same renderer so journald and log shippers see one
format. Spark's JVM writes to a file of its own (``daemon.spark_log``)."""

from __future__ import annotations

import logging
import sys

import structlog

# chatty at INFO and not useful to an operator: every poll tick, every py4j call
_QUIET = {
    "apscheduler": logging.WARNING,
    "py4j": logging.WARNING,
    "watchdog": logging.WARNING,
    "pyiceberg.io": logging.WARNING,  # "Defaulting to PyArrow FileIO" at every table open
}


def configure_logging(level: str) -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            # tracebacks as JSON, but never with local variables: a frame's locals can hold
            # the whole config, the HTTP token included
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            ),
            structlog.processors.JSONRenderer(),
        ],
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # Python warnings (pyspark's among them) become log records, not plain stderr text;
    # the JVM's own output goes to its own file (daemon.spark_log, lakestats.sketches.spark)
    logging.captureWarnings(True)
    for name, quiet in _QUIET.items():
        logging.getLogger(name).setLevel(max(quiet, root.level))
