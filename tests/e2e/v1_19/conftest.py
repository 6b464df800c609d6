"""Karmada v1.19.0-rc.0: one stack for every scenario of this package, the product installed by its chart."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.assets import Assets
from tests.e2e.conftest import world_for
from tests.e2e.scenario import World, cleanup
from tests.e2e.stack import Tools

VERSION = "v1.19.0-rc.0"


@pytest.fixture(scope="package")
def world(e2e_assets: Assets, tools: Tools) -> Iterator[World]:
    yield from world_for(VERSION, e2e_assets, tools)


@pytest.fixture
def jobs(world: World) -> Iterator[list[str]]:
    """Names of the jobs a scenario submits: deleted from Karmada afterwards, every taint removed."""
    names: list[str] = []
    yield names
    cleanup(world, names)
