"""``python -m lakestatsd``."""

from lakestatsd.app import main

raise SystemExit(main())
