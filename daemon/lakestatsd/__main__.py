"""``python -m lakestatsd``."""

from lakestatsd.cli import main

raise SystemExit(main())
