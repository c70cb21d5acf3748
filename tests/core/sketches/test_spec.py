from __future__ import annotations

from typing import Any

import pytest

from lakestats.exceptions import ConfigError
from lakestats.model import SketchSettings
from lakestats.sketches.spec import type_spec, validate_sketch_settings


def test_defaults_are_valid() -> None:
    assert validate_sketch_settings(SketchSettings()) == SketchSettings()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"kll_k": 7}, "sketch.kll_k must be an integer between 8 and 65535"),
        ({"kll_k": 65536}, "sketch.kll_k"),
        ({"kll_k": 200.0}, "sketch.kll_k"),
        ({"kll_k": True}, "sketch.kll_k"),
        ({"kll_k": "200"}, "sketch.kll_k"),
        ({"theta_lg_k": 4}, "sketch.theta_lg_k must be an integer between 5 and 26"),
        ({"theta_lg_k": 27}, "sketch.theta_lg_k"),
        ({"histogram_buckets": 0}, "sketch.histogram_buckets"),
        ({"histogram_buckets": 10_001}, "sketch.histogram_buckets"),
        ({"quantiles": (0.5, 0.25)}, "sketch.quantiles must be sorted"),
        ({"quantiles": (0.5, 0.5)}, "sketch.quantiles must be sorted"),
        ({"quantiles": (-0.1,)}, "sketch.quantiles values must be within [0, 1]"),
        ({"quantiles": (1.5,)}, "sketch.quantiles"),
        ({"quantiles": (float("nan"),)}, "sketch.quantiles"),
        ({"quantiles": ("0.5",)}, "sketch.quantiles"),
        ({"quantiles": 0.5}, "sketch.quantiles"),
    ],
)
def test_invalid_settings_fail_with_the_key(changes: dict[str, Any], message: str) -> None:
    settings = SketchSettings(**{**SketchSettings().__dict__, **changes})
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        validate_sketch_settings(settings)


def test_boundary_values_are_accepted() -> None:
    for s in (
        SketchSettings(kll_k=8, theta_lg_k=5, histogram_buckets=1, quantiles=()),
        SketchSettings(kll_k=65535, theta_lg_k=26, histogram_buckets=10_000, quantiles=(0, 1)),
    ):
        assert validate_sketch_settings(s) is s


@pytest.mark.parametrize(
    ("type_str", "flags"),  # flags: theta, kll, nan, lengths, booleans
    [
        ("boolean", (True, False, False, False, True)),
        ("int", (True, True, False, False, False)),
        ("long", (True, True, False, False, False)),
        ("float", (True, True, True, False, False)),
        ("double", (True, True, True, False, False)),
        ("decimal(38, 10)", (True, True, False, False, False)),
        ("date", (True, True, False, False, False)),
        ("timestamp", (True, True, False, False, False)),
        ("timestamptz", (True, True, False, False, False)),
        ("string", (True, False, False, True, False)),
        ("binary", (True, False, False, True, False)),
        ("fixed[16]", (True, False, False, False, False)),
        ("uuid", (True, False, False, False, False)),
    ],
)
def test_stats_per_type(type_str: str, flags: tuple[bool, ...]) -> None:
    spec = type_spec(type_str)
    assert spec is not None
    assert (spec.theta, spec.kll, spec.nan, spec.lengths, spec.booleans) == flags
    assert spec.bounds


@pytest.mark.parametrize(
    "type_str", ["time", "timestamp_ns", "timestamptz_ns", "list<int>", "variant", "decimal(39,0)"]
)
def test_unsupported_types_get_no_sketch(type_str: str) -> None:
    assert type_spec(type_str) is None
