"""The `dspine` command line: parse, call one library function, render.

Each command imports what it needs when it runs: `dspine --help` and `dspine
list` must not pay for huggingface_hub, httpx2, gguf, numpy or Textual
(benchmarks/startup.py measures it).

One module a command (or small family): parse the options, call one library function, render.
Imported in the order `dspine --help` lists the commands.
"""

# Each module registers its commands on `app`: this order is --help's.
# isort: off
from . import pull  # noqa: F401
from . import listing  # noqa: F401
from . import fit  # noqa: F401
from . import run_prompt  # noqa: F401
from . import chat  # noqa: F401
from . import bench  # noqa: F401
from . import tune  # noqa: F401
from . import doctor  # noqa: F401
from . import serve  # noqa: F401
from . import config  # noqa: F401

# isort: on
from .base import app
from .entry import main, run

__all__ = ["app", "main", "run"]
