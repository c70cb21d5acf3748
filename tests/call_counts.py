"""Counting the calls of a real object's method, the real method still doing the work."""

from __future__ import annotations

from collections import Counter
from typing import Any


def count_calls(obj: Any, name: str, calls: Counter[str]) -> None:
    """Replace ``obj.name`` with a wrapper that counts ``calls[name]`` and calls the real
    method (bound before, so wrapping twice counts twice)."""
    real = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return real(*args, **kwargs)

    setattr(obj, name, counted)
