"""Karmada v1.19.0-rc.0: one stack for every scenario of this package, the product installed by running
docs/guide-flink-on-karmada.md as written (tests/e2e/guide.py), the guide's own failover included."""

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
    # the product installed as docs/guide-flink-on-karmada.md says, its failover run too
    yield from world_for(VERSION, e2e_assets, tools, via_guide=True)


@pytest.fixture
def jobs(world: World) -> Iterator[list[str]]:
    """Names of the jobs a scenario submits: deleted from Karmada afterwards, every taint removed."""
    names: list[str] = []
    yield names
    cleanup(world, names)
