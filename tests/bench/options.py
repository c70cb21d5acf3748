"""Command-line options and progress lines the TPC-H lineitem benchmarks share."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def parse(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, *, keep: str
) -> argparse.Namespace:
    """``parser`` with the shared options added (``keep``: what ``--keep`` means for this
    benchmark), parsed and checked."""
    parser.add_argument("--scale-factor", type=float, default=1.0, help="TPC-H SF (default 1)")
    parser.add_argument("--commits", type=int, default=100, help="appends (default 100)")
    parser.add_argument(
        "--work-dir", type=Path, default=REPO / ".bench", help="default .bench/ at the repo root"
    )
    parser.add_argument("--keep", action="store_true", help=keep)
    parser.add_argument("--spark-master", default="local[2]", help="default local[2]")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (default 3)")
    parser.add_argument("--report", type=Path, default=REPO / "docs" / "benchmarks.md")
    parser.add_argument("--no-report", action="store_true", help="print only")
    args = parser.parse_args(argv)
    if args.commits < 1 or args.repeat < 1 or args.scale_factor <= 0:
        parser.error("--commits and --repeat must be >= 1, --scale-factor > 0")
    return args


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)
