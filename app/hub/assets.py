"""Model files that ship inside dspine (assets/): copied into the models folder like a
pulled file, after their sha256 is checked against the catalog's, under a temporary name
renamed when whole."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import ChecksumError
from ..models.catalog import AssetSource, asset_path
from .download import sha256_file


def copy_asset(asset: AssetSource, folder: Path) -> Path:
    """`asset` copied into `folder` (kept when already there and whole); its path there."""
    source = asset_path(asset)
    final = folder / source.name
    if final.is_file() and sha256_file(final).hexdigest() == asset.sha256:
        return final
    if not source.is_file():
        raise ChecksumError(
            f"{source} is missing from this install of dspine",
            "reinstall dspine, or pull with --draft naming another drafter",
        )
    if sha256_file(source).hexdigest() != asset.sha256:
        raise ChecksumError(
            f"{source} does not match the sha256 the catalog gives for it",
            "reinstall dspine; if you edited the file, put the catalog's sha256 back in line with it",
        )
    tmp = final.with_name(final.name + ".making")
    shutil.copyfile(source, tmp)
    os.replace(tmp, final)
    return final
