"""dspine's version, read from the installed package so it cannot drift from pyproject.toml."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("dspine")
    except PackageNotFoundError:
        # Run from a checkout that was never installed: there is no metadata to read.
        return "unknown (not installed; pip install -e . records it)"
