"""What a measurement on this machine depends on, as short strings: the llama.cpp build that
ran it, the device, the model files. A remembered answer (weight repacking, a tune) keyed by
them goes stale when one of them changes."""

from __future__ import annotations

from pathlib import Path


def library_identity() -> str:
    """llama-cpp-python, the in-process engine's llama.cpp: its version and when its library was built."""
    import llama_cpp

    folder = Path(llama_cpp.__file__).parent
    built = max((p.stat().st_mtime_ns for p in folder.glob("lib/*") if p.is_file()), default=0)
    return f"llama-cpp-python {getattr(llama_cpp, '__version__', '?')} {folder} {built}"


def binary_identity(binary: Path) -> str:
    """A llama-server build: its path, size and time (a rebuild changes the last two)."""
    stat = binary.stat()
    return f"llama-server {binary.resolve()} {stat.st_size} {stat.st_mtime_ns}"


def file_identity(path: Path | None) -> str:
    """A model file as pulled: its name, size and time (a new pull or a hand-made copy differ)."""
    if path is None:
        return "none"
    try:
        stat = path.stat()
    except OSError:
        return f"{path.name} missing"
    return f"{path.name} {stat.st_size} {stat.st_mtime_ns}"


def device_identity() -> str:
    """The GPUs by name, else the CPU's model name."""
    from backends.cpu_repack import cpu_name

    from ..fit.hardware import detect

    gpus = detect().gpus
    if gpus:
        return " + ".join(gpu.name for gpu in gpus)
    return f"CPU {cpu_name()}"
