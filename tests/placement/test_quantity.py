from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.placement.errors import PlacementInputError
from webhook.placement.quantity import (
    capacity_units,
    flink_cpu_millis,
    flink_memory_bytes,
    format_quantity,
    parse_decimal,
    request_units,
)

MI = 1024 * 1024
GI = 1024 * MI


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2048m", 2048 * MI),  # Flink: m is mebibytes, not milli
        ("2048M", 2048 * MI),
        ("2g", 2 * GI),
        ("2G", 2 * GI),
        ("1 gb", GI),
        ("512mb", 512 * MI),
        ("4096", 4096),  # bare number: bytes
        (4096, 4096),
        ("100k", 100 * 1024),
        ("1t", 1024 * GI),
        ("3 mebibytes", 3 * MI),
        ("10b", 10),
        ("2Gi", 2 * GI),  # not Flink syntax: Kubernetes quantity
        ("1.5Gi", 3 * GI // 2),
        ("1e9", 10**9),
        ("500Mi", 500 * MI),
    ],
)
def test_flink_memory(text: object, expected: int) -> None:
    assert flink_memory_bytes(text, "m") == expected


@pytest.mark.parametrize("bad", ["", "2 GiB", "lots", "1.5g", "-2g", "2Gx", None, True, [1]])
def test_flink_memory_rejects_with_the_value_named(bad: object) -> None:
    with pytest.raises(PlacementInputError) as info:
        flink_memory_bytes(bad, "spec.taskManager.resource.memory")
    assert "spec.taskManager.resource.memory" in str(info.value)


@pytest.mark.parametrize(
    ("resource", "text", "units"),
    [
        ("cpu", "1", 1000),
        ("cpu", "250m", 250),
        ("cpu", "0.5", 500),
        ("cpu", "1.0001", 1001),  # requests round up
        ("memory", "1Gi", GI),
        ("memory", "1G", 10**9),
        ("memory", "2048m", 3),  # Kubernetes reading of 2048m: 2.048 bytes, rounded up
        ("memory", "1e3", 1000),
        ("memory", "1E", 10**18),
        ("nvidia.com/gpu", "2", 2),
        ("pods", "110", 110),
    ],
)
def test_request_units(resource: str, text: str, units: int) -> None:
    assert request_units(resource, text, "x") == units


def test_capacity_rounds_down_and_request_rounds_up() -> None:
    assert capacity_units("cpu", "1.0005", "x") == 1000
    assert request_units("cpu", "1.0005", "x") == 1001


@pytest.mark.parametrize("bad", ["1Gb", "1 Gi", "Gi", "1..2", "--1", "0x10", "1Ki1", "-1"])
def test_malformed_quantity_named(bad: str) -> None:
    with pytest.raises(PlacementInputError, match=r"nodes\[3\]\.allocatable\.memory"):
        parse_decimal(bad, "nodes[3].allocatable.memory")


def test_flink_cpu() -> None:
    assert flink_cpu_millis(1, "c") == 1000
    assert flink_cpu_millis(0.25, "c") == 250
    assert flink_cpu_millis("2", "c") == 2000


@given(st.integers(min_value=0, max_value=10**7))
def test_format_round_trips(units: int) -> None:
    for resource in ("cpu", "memory", "nvidia.com/gpu"):
        text = format_quantity(resource, units)
        assert request_units(resource, text, "x") == units


@given(st.integers(min_value=0, max_value=2**20), st.sampled_from(["", "b", "k", "m", "g", "kb", "mb", "gb"]))
def test_flink_units_are_binary(number: int, unit: str) -> None:
    power = {"": 0, "b": 0, "k": 1, "kb": 1, "m": 2, "mb": 2, "g": 3, "gb": 3}[unit]
    assert flink_memory_bytes(f"{number}{unit}", "x") == number * 1024**power
