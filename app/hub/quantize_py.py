"""llama-quantize's command line, `--allow-requantize SOURCE OUT TYPE`, through the
llama.cpp inside llama-cpp-python (a dspine dependency): on a machine that has no
llama.cpp build yet (`pip install dspine` alone), a package-index bundle can still be
made. Run as a child process (`python -m app.hub.quantize_py ...`), as llama-quantize
would be: llama.cpp's log and any crash stay out of the pull."""

from __future__ import annotations

import os
import sys


def quantize(source: str, out: str, type_name: str) -> int:
    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{type_name.upper()}", None)
    if ftype is None:
        print(f"error: llama-cpp-python knows no quant type {type_name}", file=sys.stderr)
        return 2
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    failed = llama_cpp.llama_model_quantize(source.encode(), out.encode(), params)
    if failed:
        print(f"error: llama_model_quantize returned {failed}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    args = [a for a in argv if a != "--allow-requantize"]  # always allowed: the wheel ships a quant
    if len(args) != 3:
        print("usage: python -m app.hub.quantize_py --allow-requantize SOURCE OUT TYPE", file=sys.stderr)
        return 2
    return quantize(*args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
