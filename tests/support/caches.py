"""Where the tests keep what is slow to make and safe to share between runs: the patched
llama-server build, aider's venv, the npm agents, llama.cpp's templates. One folder,
~/.cache/dspine-tests, that DSPINE_TEST_CACHE moves (CI points it at its own cache)."""

from __future__ import annotations

import os
from pathlib import Path

TEST_CACHE = Path(os.environ.get("DSPINE_TEST_CACHE") or Path.home() / ".cache" / "dspine-tests")
