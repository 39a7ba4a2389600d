"""Train a DSpine drafter for SmolLM2-135M, and its injection-off twin, on the CPU.

    python -m train_dspine check     # the JAX drafter's properties the llama.cpp side shares
    python -m train_dspine data      # greedy continuations + target features (once)
    python -m train_dspine train     # both variants; stops after --minutes, resumes next time
    python -m train_dspine evaluate  # held-out acceptance: DSpine, injection off, random init
    python -m train_dspine export    # safetensors + config.json per variant

Run from scripts/ with the venv of requirements.txt (JAX stays out of dspine's own
dependencies); docs/training-dspine.md has the whole recipe and the budget."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

DEFAULT_RUNS = Path("/work/train-runs")
DEFAULT_SERVER = Path.home() / ".cache/dspine-tests/llama-server-519cff5f2adb7615/bin/llama-server"
MASK_TOKEN_ID = 16  # SmolLM2's <empty_output>: a CONTROL token no chat ever produces
VARIANTS = ("dspine", "injection-off")


def _shape(target, injection: bool, args) -> object:
    from .drafter import DrafterShape

    return DrafterShape(
        n_layer=args.layers, n_embd=target.n_embd, n_ff=target.n_ff, n_head=target.n_head,
        n_head_kv=target.n_head_kv, head_dim=target.head_dim, rope_theta=target.rope_theta,
        rms_eps=target.rms_eps, n_taps=len(args.taps), block_size=args.block,
        transfer_dim=args.transfer_dim, injection=injection, write_init_std=args.write_init_std,
    )  # fmt: skip


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="train_dspine", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("command", choices=["check", "data", "train", "evaluate", "export"])
    parser.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="where data, checkpoints and exports go")
    parser.add_argument("--target", type=Path, help="the target GGUF (default: RUNS/target/smollm2-135m-q8_0.gguf)")
    parser.add_argument("--server", type=Path, default=DEFAULT_SERVER, help="the patched llama-server binary")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--per-category", type=int, default=100)
    parser.add_argument("--held-out", type=int, default=16)
    parser.add_argument("--n-predict", type=int, default=128)
    parser.add_argument("--layers", type=int, default=3)
    parser.add_argument("--block", type=int, default=16)
    parser.add_argument("--transfer-dim", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3000, help="the whole budget of a variant, over all sessions")
    parser.add_argument("--minutes", type=float, default=30.0, help="wall clock for each variant in this call")
    parser.add_argument(
        "--stop-at", type=int, help="train: stop this call at this step (the schedule still spans --steps)"
    )
    parser.add_argument("--checkpoint-minutes", type=float, default=3.0)
    parser.add_argument("--seqs-per-step", type=int, default=4)
    parser.add_argument("--anchors-per-seq", type=int, default=16)
    parser.add_argument("--lr", type=float, default=6e-4)
    parser.add_argument(
        "--injection-lr-scale", type=float, default=10.0, help="the injection's tensors learn this much faster"
    )
    parser.add_argument(
        "--write-init-std", type=float, default=0.02, help="the injection write's initial scale (0: a twin at start)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--eval-stride", type=int, default=4)
    parser.add_argument("--no-random", action="store_true", help="evaluate: skip the random-init drafter")
    args = parser.parse_args(argv)
    if args.command == "check":
        from .check import run_checks

        for line in run_checks():
            print(f"ok: {line}")
        return
    target = args.target or args.runs / "target" / "smollm2-135m-q8_0.gguf"
    if not target.is_file():
        _fail(f"no target GGUF at {target}: make it with `llama-quantize --allow-requantize "
              f"SmolLM2-135M-Instruct.Q4_1.gguf {target} Q8_0` or pass --target")  # fmt: skip
    data_dir = args.runs / "data"

    from .target import default_taps, load_target

    tshape, tweights = load_target(target)
    args.taps = default_taps(tshape.n_layer)

    if args.command == "data":
        from .features import extract
        from .generate import generate
        from .prompts import build_prompts

        if not args.server.is_file():
            _fail(f"no llama-server at {args.server}: pass --server (the patched build)")
        data_dir.mkdir(parents=True, exist_ok=True)
        prompts = build_prompts(args.per_category, args.held_out, args.seed)
        generate(prompts, data_dir / "sequences.jsonl", args.server, target, args.n_predict)
        if (data_dir / "features.npy").exists():
            print(f"features already in {data_dir}", flush=True)
            return
        report = extract(data_dir / "sequences.jsonl", target, data_dir, args.taps)
        print(f"greedy agreement with llama-server: {report['greedy_agreement']:.4f} "
              f"over {report['positions_checked']} positions {report['greedy_agreement_per_category']}")  # fmt: skip
        return

    from .data import Dataset
    from .drafter import init_params

    if not (data_dir / "index.json").is_file():
        _fail(f"no training data in {data_dir}: run `python -m train_dspine data` first")
    data = Dataset.load(data_dir)
    embed = tweights["token_embd.weight"]

    if args.command == "train":
        from .train import train

        for variant in args.variants:
            shape = _shape(tshape, variant == "dspine", args)

            def init(shape=shape):
                return init_params(shape, tshape, tweights, np.random.default_rng(args.seed), from_target=True)

            train(args.runs / variant, data, shape, init, embed, MASK_TOKEN_ID, args.steps, args.minutes,
                  args.checkpoint_minutes, args.seqs_per_step, args.anchors_per_seq, args.lr, args.seed,
                  stop_at=args.stop_at, injection_lr_scale=args.injection_lr_scale)  # fmt: skip
        return

    from .model_io import drafter_config, export, load_params

    def trained(variant: str) -> dict:
        found = load_params(args.runs / variant)
        if found is None:
            _fail(f"no checkpoint in {args.runs / variant}: run `python -m train_dspine train` first")
        return found  # type: ignore[return-value]

    if args.command == "evaluate":
        from .train import acceptance

        # measured variants are merged into acceptance.json, so they can be measured one at a time
        saved = args.runs / "acceptance.json"
        results = json.loads(saved.read_text()) if saved.exists() else {}
        for variant in args.variants + ([] if args.no_random else ["random"]):
            injection = variant != "injection-off"
            shape = _shape(tshape, injection, args)
            if variant == "random":
                params = init_params(shape, tshape, tweights, np.random.default_rng(args.seed + 1), from_target=False)
            else:
                params = trained(variant)
            results[variant] = acceptance(data, shape, params, embed, MASK_TOKEN_ID, stride=args.eval_stride)
            print(variant, json.dumps(results[variant]), flush=True)
        saved.write_text(json.dumps(results, indent=2) + "\n")
        print(f"{'category':8} " + " ".join(f"{v:>14}" for v in results))
        for category in sorted(next(iter(results.values()))):
            print(f"{category:8} " + " ".join(f"{results[v][category]['tau']:14.3f}" for v in results))
        return

    from .train import reference_drafts

    for variant in args.variants:
        shape = _shape(tshape, variant == "dspine", args)
        config = drafter_config(shape, args.taps, MASK_TOKEN_ID, tshape.n_vocab)
        params = trained(variant)
        folder = export(args.runs / "export" / variant, params, config)
        refs = reference_drafts(data, shape, params, embed, MASK_TOKEN_ID)
        (folder / "reference-drafts.json").write_text(json.dumps(refs) + "\n")
        print(f"{variant}: {folder} ({sum(v.size for v in params.values()) / 1e6:.2f}M parameters)")


if __name__ == "__main__":
    main()
