"""llama.cpp's CPU weight repacking, settled once per CPU and llama.cpp build before an engine
starts: on where it runs, off (LLAMA_ARG_REPACK=false, which both engines follow) where a
probe saw llama.cpp's AMX kernels crash (backends/cpu_repack.py says why)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from backends import cpu_repack

from .build_identity import binary_identity, library_identity

OFF_NOTE = "llama.cpp's AMX kernels crash on this CPU: weight repacking is off here (LLAMA_ARG_REPACK=false)"
CHECKING_NOTE = "checking llama.cpp's CPU kernels on this machine (once)"
NOTES = (CHECKING_NOTE, OFF_NOTE)  # said to the user as they are, not folded into a loading line


def _load(record_file: Path) -> dict[str, bool]:
    try:
        data = json.loads(record_file.read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, bool)} if isinstance(data, dict) else {}


def _save(record_file: Path, record: dict[str, bool]) -> None:
    try:
        record_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = record_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
        os.replace(tmp, record_file)
    except OSError:
        pass  # asked again next time: a cost, never a failure


def repacking_survives(
    record_file: Path,
    key: str,
    probe: Callable[[], bool | None],
    on_progress: Callable[[str], None] | None = None,
) -> bool | None:
    """The remembered answer for `key`, else the probe's (remembered when it gave one)."""
    record = _load(record_file)
    if key in record:
        return record[key]
    if on_progress is not None:
        on_progress(CHECKING_NOTE)
    verdict = probe()
    if verdict is not None:
        record[key] = verdict
        _save(record_file, record)
    return verdict


def settle(
    record_file: Path,
    engine: str,
    binary: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
    cpuinfo: str | None = None,
) -> bool:
    """Before `engine` ("server" with its `binary`, or "inproc") starts: turn repacking off in
    this process's environment (which llama-server inherits) where it crashes here. The
    user's own LLAMA_ARG_REPACK is left as it is. True when repacking stays on."""
    asked = cpu_repack.asked_by_user(os.environ)
    if asked is not None:
        return asked
    cpu_repack.forget_empty(os.environ)
    if not cpu_repack.advertises_amx(cpuinfo):
        return True
    if engine == "server" and binary is not None:
        key = f"{cpu_repack.cpu_name(cpuinfo)} | {binary_identity(binary)}"
        found = binary

        def probe() -> bool | None:
            return cpu_repack.server_survives_repacking(found)

    else:
        key = f"{cpu_repack.cpu_name(cpuinfo)} | {library_identity()}"
        probe = cpu_repack.library_survives_repacking
    if repacking_survives(record_file, key, probe, on_progress) is False:
        os.environ[cpu_repack.REPACK_VARIABLE] = "false"
        if on_progress is not None:
            on_progress(OFF_NOTE)
        return False
    return True
