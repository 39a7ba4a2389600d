"""Train a DSpine drafter for SmolLM2-135M (the authors' architecture and objective) and its
DFlash twin, on the CPU.

    python -m train_dspine check     # the JAX forward against the reference's golden files
    python -m train_dspine continuations  # the next chunk(s) of greedy continuations, kept in the repo
    python -m train_dspine data      # the continuations (made where missing) + target features
    python -m train_dspine features  # only the feature shards of what is generated so far
    python -m train_dspine train     # each variant; stops after --minutes, resumes next time
    python -m train_dspine evaluate  # held-out acceptance: DSpine (refined, base) and the twin
    python -m train_dspine export    # SpecForge-layout model.safetensors + config.json per variant

Run from scripts/ with the venv of requirements.txt (JAX stays out of dspine's own
dependencies); docs/training-dspine.md has the whole recipe."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np

from .corpus import CATEGORIES

DEFAULT_RUNS = Path("/work/train-runs")
DEFAULT_SERVER = Path.home() / ".cache/dspine-tests/llama-server-41ae2e6341f8ac51/bin/llama-server"
MASK_TOKEN_ID = 16  # SmolLM2's <empty_output>: a CONTROL token no chat ever produces
VARIANTS = ("dspine", "dflash")
# SmolLM2's width is 576 and its head's spectrum is flat (the top 256 of 576 directions hold
# 64% of the variance, 128 only 41%): r = 256 keeps most of a token's identity in its code at a
# 49,152 x 256 table; s = r / 2 as the authors' default (1024 / 512). docs/training-dspine.md.
TRANSFER_RANK, MESSAGE_SIZE, TOP_K = 256, 128, 16
# Q8_0 keeps a unit-norm code row (values under 0.5) to within 0.5/127/2 a value: a table further
# than this from a run's own is another table, not its quantised copy.
CODES_Q8_0_ERROR = 0.01


def _shape(target, injection: bool, args):
    from .drafter import DrafterShape

    return DrafterShape(
        n_layer=args.layers, n_embd=target.n_embd, n_ff=target.n_ff, n_head=target.n_head,
        n_head_kv=target.n_head_kv, head_dim=target.head_dim, rope_theta=target.rope_theta,
        rms_eps=target.rms_eps, n_taps=len(args.taps), block_size=args.block,
        transfer_rank=args.transfer_rank, message_size=args.message_size, top_k=args.top_k, injection=injection,
    )  # fmt: skip


def _objective(args):
    from .objective import Objective

    return Objective(
        ce_weight=args.ce_weight, l1=not args.no_l1, refinement=not args.no_refinement_loss,
        alignment=not args.no_alignment, alignment_weight=args.alignment_weight,
        alignment_warmup=args.alignment_warmup, replacement=not args.no_replacement,
        replacement_probability=args.replacement_probability, gamma=args.gamma,
    )  # fmt: skip


def _continuations(args, target: Path, chunks: int | None) -> None:
    """The chunks of the first --prompts prompts not in the repository yet (at most `chunks`),
    each written whole as it finishes; needs no JAX."""
    from . import continuations as kept
    from .corpus import build
    from .generate import Server

    prompts = build(args.seed)
    # The server's version is recorded, not compared (greedy is greedy across builds of one llama.cpp).
    server = kept.server_version(args.server) if args.server.is_file() else "?"
    made = kept.header(kept.sha256_file(target), server, args.seed, args.n_predict)
    try:
        todo = kept.missing(prompts, args.prompts, kept.FOLDER, made)
    except kept.Mismatch as exc:
        _fail(str(exc))
    todo = todo[:chunks] if chunks is not None else todo
    print(f"continuations: {len(todo)} chunk(s) of {kept.CHUNK} prompts to make", flush=True)
    if not todo:
        return
    if not args.server.is_file():
        _fail(f"no llama-server at {args.server}: pass --server")
    server = Server(args.server, target, slots=args.slots, threads=args.threads)
    try:
        for index in todo:
            records = kept.make_chunk(prompts, index, server.tokenize, server.greedy, args.n_predict, args.slots)
            path = kept.chunk_path(kept.FOLDER, index)
            kept.write_chunk(path, made, records)
            print(f"  wrote {path.name} ({len(records)} prompts)", flush=True)
    finally:
        server.stop()


def _warm_start(args, tshape, tweights) -> tuple[dict, np.ndarray]:
    """The DSpine drafter's params and code table from --init-from (a converted GGUF), checked
    against the shape this run trains."""
    from .params import init_params
    from .warm import NotThisDrafter, params_from_gguf

    shape = _shape(tshape, True, args)
    readout = np.zeros((args.transfer_rank, tshape.n_embd), np.float32)
    wanted = {k: v.shape for k, v in init_params(shape, tshape.n_layer, tweights, readout,
                                                 np.random.default_rng(0)).items()}  # fmt: skip
    if not args.init_from.is_file():
        _fail(f"--init-from {args.init_from}: no such file")
    try:
        params, codes = params_from_gguf(args.init_from, wanted)
    except NotThisDrafter as exc:
        _fail(str(exc))
    if codes is None or codes.shape != (tshape.n_vocab, args.transfer_rank):
        _fail(f"--init-from {args.init_from}: no code table of {tshape.n_vocab} x {args.transfer_rank} in it")
    print(f"starting from {args.init_from} ({sum(v.size for v in params.values()) / 1e6:.2f}M parameters)")
    return params, codes


def _category_weight(text: str) -> tuple[str, int]:
    name, _, count = text.partition("=")
    if name not in CATEGORIES or not count.isdigit() or int(count) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give CATEGORY=N, N a whole number >= 1, CATEGORY one of "
                                         f"{', '.join(CATEGORIES)}")  # fmt: skip
    return name, int(count)


def _fail(message: str) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="train_dspine", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    add = parser.add_argument
    add("command", choices=["check", "continuations", "data", "features", "train", "evaluate", "export"])
    add("--runs", type=Path, default=DEFAULT_RUNS, help="where data, checkpoints and exports go")
    add("--target", type=Path, help="the target GGUF (default: RUNS/target/smollm2-135m-q8_0.gguf)")
    add("--server", type=Path, default=DEFAULT_SERVER, help="the patched llama-server binary")
    add("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    add("--n-predict", type=int, default=128)
    add("--prompts", type=int, default=1000, help="continuations: of the corpus's first N prompts")
    add("--chunks", type=int, help="continuations: make at most this many chunks in this call")
    add("--slots", type=int, default=4)
    add("--threads", type=int, default=1, help="llama-server's threads (the machine is shared)")
    add("--layers", type=int, default=3)
    add("--block", type=int, default=16)
    add("--transfer-rank", type=int, default=TRANSFER_RANK)
    add("--message-size", type=int, default=MESSAGE_SIZE)
    add("--top-k", type=int, default=TOP_K)
    add("--steps", type=int, default=3000, help="the whole budget of a variant, over all sessions")
    add("--minutes", type=float, default=30.0, help="wall clock for each variant in this call")
    add("--stop-at", type=int, help="train: stop this call at this step (the schedule still spans --steps)")
    add("--checkpoint-minutes", type=float, default=5.0)
    add("--seqs-per-step", type=int, default=4)
    add("--category-weights", nargs="+", type=_category_weight, default=[], metavar="CATEGORY=N",
        help="train: each epoch holds a category's sequences N times (code=3 edit=2); 1 where not named")  # fmt: skip
    add("--anchors-per-seq", type=int, default=8)
    add("--lr", type=float, default=6e-4)
    add("--seed", type=int, default=0)
    add("--random-init", action="store_true", help="a random backbone instead of the target's last blocks")
    add("--init-from", type=Path, help="train: start a new run from this converted DSpine GGUF (the shipped one) "
        "and its code table, not from the target's blocks")  # fmt: skip
    # the objective: every term and the schedule on by default, as the authors train
    add("--ce-weight", type=float, default=0.1, help="CE's share of the CE + L1 mix")
    add("--no-l1", action="store_true", help="CE alone instead of the CE + L1 mix")
    add("--no-refinement-loss", action="store_true")
    add("--no-alignment", action="store_true")
    add("--alignment-weight", type=float, default=0.5)
    add("--alignment-warmup", type=int, default=146)
    add("--no-replacement", action="store_true", help="never replace predecessors by true codes")
    add("--replacement-probability", type=float, default=0.5)
    add("--gamma", type=float, default=7.0, help="position weights exp(-(t-1)/gamma)")
    add("--eval-stride", type=int, default=4)
    add("--eval-limit", type=int, help="evaluate: at most this many held-out sequences")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
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
    if args.command in ("continuations", "data"):
        _continuations(args, target, args.chunks if args.command == "continuations" else None)
        if args.command == "continuations":
            return

    from .target import default_taps, load_target

    tshape, tweights = load_target(target)
    args.taps = default_taps(tshape.n_layer)

    if args.command in ("data", "features"):
        from .continuations import sequences
        from .features import extract

        data_dir.mkdir(parents=True, exist_ok=True)
        count = sequences(data_dir / "sequences.jsonl")  # from the repository's chunks
        print(f"sequences.jsonl: {count} continuations from scripts/train_dspine/continuations/")
        report = extract(data_dir / "sequences.jsonl", target, data_dir, args.taps, final=args.command == "data")
        print(f"greedy agreement with llama-server: {report['greedy_agreement']:.4f} over "
              f"{report['positions_checked']} positions {report['greedy_agreement_per_category']}")  # fmt: skip
        return

    from .data import Dataset
    from .params import init_params, transfer_space

    data = Dataset.load(data_dir)
    embed = tweights["token_embd.weight"]
    # the codes are made once and kept: eigenvector signs may differ between LAPACK builds
    codes_path = args.runs / f"transfer-r{args.transfer_rank}.npz"
    warm = _warm_start(args, tshape, tweights) if args.command == "train" and args.init_from else None
    if warm is not None and (args.runs / "dspine" / "checkpoint" / "state.json").exists():
        print(f"--init-from {args.init_from}: not used, {args.runs / 'dspine'} has a checkpoint to go on from")
    if not codes_path.exists():
        codes, readout, _ = transfer_space(embed, args.transfer_rank)
        # a run that goes on from a shipped drafter keeps the code table it was trained against
        # `from_gguf`: the readout beside a shipped drafter's table was not made with it
        np.savez(codes_path, codes=codes if warm is None else warm[1], readout=readout,
                 from_gguf=str(args.init_from) if warm is not None else "")  # fmt: skip
    with np.load(codes_path) as f:
        codes, readout = f["codes"], f["readout"]
        from_gguf = str(f["from_gguf"]) if "from_gguf" in f.files else ""
    started = (args.runs / "dspine" / "checkpoint" / "state.json").exists()
    if args.command == "train" and "dspine" in args.variants and warm is None and from_gguf and not started:
        _fail(f"{codes_path} holds the code table of {from_gguf}: a new DSpine run here starts from it "
              f"(--init-from {from_gguf}), or give this run --runs of its own")  # fmt: skip
    if warm is not None and np.abs(codes - warm[1]).max() > CODES_Q8_0_ERROR:
        _fail(f"{codes_path} holds another code table than {args.init_from}: give this run --runs of its own")

    if args.command == "train":
        from .train import train

        for variant in args.variants:
            shape = _shape(tshape, variant == "dspine", args)

            def init(shape=shape):
                if warm is not None and shape.injection:
                    return warm[0]
                return init_params(shape, tshape.n_layer, tweights, readout, np.random.default_rng(args.seed),
                                   from_target=not args.random_init)  # fmt: skip

            train(args.runs / variant, data, shape, init, embed, codes, MASK_TOKEN_ID, _objective(args), args.steps,
                  args.minutes, args.checkpoint_minutes, args.seqs_per_step, args.anchors_per_seq, args.lr, args.seed,
                  stop_at=args.stop_at, weights=dict(args.category_weights))  # fmt: skip
        return

    from .model_io import drafter_config, export, load_params

    def trained(variant: str) -> dict:
        found = load_params(args.runs / variant)
        if found is None:
            _fail(f"no checkpoint in {args.runs / variant}: run `python -m train_dspine train` first")
        return found

    if args.command == "evaluate":
        from .acceptance import acceptance

        saved = args.runs / "acceptance.json"
        results = json.loads(saved.read_text()) if saved.exists() else {}
        for variant in args.variants:
            shape = _shape(tshape, variant == "dspine", args)
            measured = acceptance(data, shape, trained(variant), embed, codes, MASK_TOKEN_ID, stride=args.eval_stride,
                                  limit=args.eval_limit)  # fmt: skip
            for mode, table in measured.items():
                results[variant if mode == "refined" or variant == "dflash" else f"{variant}-no-refinement"] = table
        saved.write_text(json.dumps(results, indent=2) + "\n")
        print(f"{'category':8} " + " ".join(f"{v:>22}" for v in results))
        for category in sorted(next(iter(results.values()))):
            cells = [f"{results[v][category]['tau']:8.3f} +- {results[v][category]['spread']:.3f}" for v in results]
            print(f"{category:8} " + " ".join(f"{c:>22}" for c in cells))
        return

    for variant in args.variants:
        shape = _shape(tshape, variant == "dspine", args)
        config = drafter_config(shape, args.taps, MASK_TOKEN_ID, tshape.n_vocab, _objective(args))
        params = trained(variant)
        folder = export(args.runs / "export" / variant, params, config, codes if shape.injection else None)
        from .reference import reference_drafts

        drafts = reference_drafts(data, shape, params, embed, codes if shape.injection else None, MASK_TOKEN_ID)
        (folder / "reference-drafts.json").write_text(json.dumps({"target": str(target), "drafts": drafts}) + "\n")
        print(f"{variant}: {folder} ({sum(v.size for v in params.values()) / 1e6:.2f}M parameters)")


if __name__ == "__main__":
    main()
