"""Qwen3.8-27B and its DSpine drafter as header-only GGUFs (shapes without weights), and the
test hub serving them in place of the catalog's files: what `dspine fit` and the first-run
offer read. Fixtures, registered for every test by tests/conftest.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import DFLASH_REPO, DSPINE_REPO, TARGET_REPO
from tests.support.fake_hub import FakeHub
from tests.support.gguf_models import QTYPE, qwen38_27b, qwen38_27b_drafter, write_header_only


@pytest.fixture(scope="module")
def headers(tmp_path_factory) -> dict[str, Path]:
    """Header-only GGUFs of Qwen3.8-27B (two quants) and the DSpine drafter (two variants)."""
    folder = tmp_path_factory.mktemp("headers")
    return {
        "Qwen3.8-27B-Q4_K_M.gguf": write_header_only(folder / "q4.gguf", qwen38_27b(QTYPE.Q4_K)),
        "Qwen3.8-27B-Q8_0.gguf": write_header_only(folder / "q8.gguf", qwen38_27b(QTYPE.Q8_0)),
        "Qwen3.8-27B-DSpine-b16-Q4_K_M.gguf": write_header_only(folder / "dq4.gguf", qwen38_27b_drafter(QTYPE.Q4_K)),
        "Qwen3.8-27B-DSpine-b16-BF16.gguf": write_header_only(folder / "dbf16.gguf", qwen38_27b_drafter(QTYPE.BF16)),
    }


@pytest.fixture
def gguf_hub(hub: FakeHub, headers: dict[str, Path]) -> FakeHub:
    """The test hub with the headers as the catalog bundle's files (and no DFlash repository)."""
    hub.add_repo(TARGET_REPO, {n: p.read_bytes() for n, p in headers.items() if "DSpine" not in n})
    hub.add_repo(DSPINE_REPO, {n: p.read_bytes() for n, p in headers.items() if "DSpine" in n})
    del hub.repos[DFLASH_REPO]
    return hub
