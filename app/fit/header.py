"""Where a model's GGUF header comes from: a pulled file, the user's HF cache, or
the hub over HTTP Range (about 6 MB of a 16 GB file), kept as a sparse file of
the full size that later fits and llama.cpp's dry run open like the real one."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from huggingface_hub.utils import hf_raise_for_status

from backends.gguf_header import GgufHeader, RangeSource, parse_header, read_local

from ..hub import client as hub
from ..hub.store import find_in_hf_cache, local_path
from ..models.selection import RemoteFile
from ..settings import Settings


def remote_header(remote: RemoteFile, folder: Path) -> tuple[GgufHeader, Path]:
    """Read a remote header over HTTP Range; keep it as a sparse file of the full size,
    which both later fits and llama.cpp's dry run can open like the real file."""
    key = remote.sha256 or hashlib.sha256(f"{remote.repo}/{remote.path}@{remote.commit}".encode()).hexdigest()
    cached = folder / f"{key}.gguf"
    if cached.exists():
        header = read_local(cached)
        header.source = f"{remote.repo}/{remote.path}"
        return header, cached
    client = hub.http_client()

    def fetch(offset: int, size: int) -> bytes:
        headers = {**hub.request_headers(), "Range": f"bytes={offset}-{offset + size - 1}"}
        with hub.hub_errors(remote.repo):
            response = client.get(hub.download_url(remote), headers=headers, follow_redirects=True, timeout=60)
            hf_raise_for_status(response)
        return response.content[:size]

    source = RangeSource(f"{remote.repo}/{remote.path}", remote.size, fetch)
    try:
        header = parse_header(source)
    except hub.TRANSPORT_ERRORS as exc:
        raise hub.unreachable(exc) from exc
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(".tmp")
    with tmp.open("wb") as handle:
        handle.write(source.fetched[: header.header_bytes])
        handle.truncate(remote.size)  # sparse: no disk used for the weights
    os.replace(tmp, cached)
    return header, cached


def local_or_remote(remote: RemoteFile, settings: Settings) -> tuple[GgufHeader, Path, str]:
    """(header, a path llama.cpp can open, the path the plan names)."""
    final = local_path(settings.models_dir, remote)
    for candidate in (final, find_in_hf_cache(remote)):
        if candidate is not None and candidate.exists() and candidate.stat().st_size == remote.size:
            return read_local(candidate), candidate, str(candidate)
    header, sparse = remote_header(remote, settings.header_cache)
    return header, sparse, str(final)
