"""The walls of DESIGN.md, checked: `backends/` imports nothing from `app/`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/<layer>/ -> the repository

BLOCK_APP = """
import importlib, pkgutil, sys

class NoApp:
    def find_spec(self, name, path=None, target=None):
        if name == "app" or name.startswith("app."):
            raise ImportError(f"backends imported {name}")
        return None

sys.meta_path.insert(0, NoApp())
import backends
for module in pkgutil.iter_modules(backends.__path__):
    importlib.import_module(f"backends.{module.name}")
print("ok", len(list(pkgutil.iter_modules(backends.__path__))))
"""


def test_backends_import_without_app():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", BLOCK_APP], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")


def _imports(path: Path) -> list[str]:
    """Absolute names of what a module imports (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module or "")
    return names


def test_no_backends_module_names_app():
    for path in sorted((ROOT / "backends").rglob("*.py")):
        wrong = [n for n in _imports(path) if n == "app" or n.startswith("app.")]
        assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


# app/ from the top floor down: a room may import from rooms below it, never above.
FLOORS = [
    {"__main__"},
    {"cli"},
    {"doctor_remote"},  # doctor --url: the remote checks, over doctor's Check
    {"cli_views", "doctor"},
    {"tui", "serve"},
    {"chat"},  # a chat assembled for the screen and for -p, its store
    {"agent"},
    {"run"},
    {"fit"},
    {"hub"},
    {"models"},
    {"settings", "units", "terminal_text", "choices", "key_files"},
    {"paths", "nesting"},
    {"errors", "version", "__init__"},
]


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor(room: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def test_app_imports_point_down():
    for path in sorted((ROOT / "app").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        room = _room(".".join(rel.parts))
        for name in _imports(path):
            if name != "app" and not name.startswith("app."):
                continue
            other = _room(name)
            assert other == room or _floor(other) > _floor(room), (
                f"{rel.as_posix()}.py ({room}) imports {name} ({other}), which is not below it"
            )
