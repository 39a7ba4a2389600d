"""The Hugging Face hub: file listings, download URLs, auth, and errors in words.

All hub I/O goes through huggingface_hub, so HF_ENDPOINT, HF_TOKEN, the stored
token (`hf auth login`) and HF_HUB_OFFLINE work as they do for `hf`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import httpx2
from huggingface_hub import HfApi, RepoFile, constants, get_token, hf_hub_url
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import build_hf_headers, get_session

from ..errors import AuthError, DspineError, NetworkError, NotFoundError
from ..models.selection import RemoteFile
from ..settings import parse_bool

TRANSPORT_ERRORS = (httpx2.TransportError,)


def endpoint() -> str:
    # Read at call time, not at import like huggingface_hub's constants, so a
    # changed HF_ENDPOINT (a mirror, a test hub) is honoured.
    return os.environ.get("HF_ENDPOINT", constants.ENDPOINT).rstrip("/")


def is_offline() -> bool:
    flag = os.environ.get("HF_HUB_OFFLINE")
    if flag is None:
        return constants.HF_HUB_OFFLINE
    try:
        return parse_bool(flag)
    except ValueError:
        return False  # as huggingface_hub reads a word it does not know


def unreachable(exc: BaseException) -> NetworkError:
    return NetworkError(
        f"cannot reach the hub at {endpoint()} ({type(exc).__name__}: {exc})",
        "check your connection (or HF_ENDPOINT) and run it again; a pull resumes where it stopped",
    )


@contextlib.contextmanager
def hub_errors(repo: str) -> Iterator[None]:
    """Turn huggingface_hub's and httpx's exceptions into messages for people."""
    try:
        yield
    except GatedRepoError as exc:
        has_token = get_token() is not None
        raise AuthError(
            f"{repo} is gated and "
            + ("your token has not been granted access" if has_token else "no Hugging Face token is set"),
            f"accept its terms at {endpoint()}/{repo}, then "
            + ("check the token's permissions" if has_token else "set HF_TOKEN or run `hf auth login`"),
        ) from exc
    except RepositoryNotFoundError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status == 401 and get_token() is not None:
            raise AuthError(
                f"the hub refused your token for {repo}",
                "check HF_TOKEN or run `hf auth login` again",
            ) from exc
        raise NotFoundError(
            f"repository {repo} was not found on {endpoint()}",
            "check the spelling (ORG/REPO); if it is private, set HF_TOKEN or run `hf auth login`",
        ) from exc
    except RevisionNotFoundError as exc:
        raise NotFoundError(f"{repo} has no such revision", "use the default branch (main)") from exc
    except OfflineModeIsEnabled as exc:
        raise NetworkError(
            f"offline mode is on (HF_HUB_OFFLINE) and {repo} is not on disk",
            "unset HF_HUB_OFFLINE to download it",
        ) from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise DspineError(
            f"the hub answered {status} for {repo}: {str(exc).splitlines()[0]}",
            "try again later; run with --debug for details",
        ) from exc
    except TRANSPORT_ERRORS as exc:
        raise unreachable(exc) from exc


def list_files(repo: str, revision: str | None = None) -> list[RemoteFile]:
    """Every file of `repo` at one commit, with sizes and LFS sha256."""
    if is_offline():
        raise NetworkError(
            f"offline mode is on (HF_HUB_OFFLINE) and {repo} is not on disk",
            "unset HF_HUB_OFFLINE to download it",
        )
    api = HfApi(endpoint=endpoint())
    with hub_errors(repo):
        commit = api.model_info(repo, revision=revision).sha or revision or "main"
        entries = api.list_repo_tree(repo, revision=commit, recursive=True)
        return [
            RemoteFile(
                repo=repo,
                path=entry.path,
                size=entry.size,
                sha256=entry.lfs.sha256 if entry.lfs else None,
                commit=commit,
            )
            for entry in entries
            if isinstance(entry, RepoFile)
        ]


def download_url(remote: RemoteFile) -> str:
    return hf_hub_url(remote.repo, remote.path, revision=remote.commit, endpoint=endpoint())


def request_headers() -> dict[str, str]:
    return build_hf_headers(library_name="dspine")


def http_client() -> httpx2.Client:
    return get_session()
