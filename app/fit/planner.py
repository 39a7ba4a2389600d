"""The planner: which target quant, drafter, KV type, context and GPU layers
fit this GPU for the user's goal, with every byte accounted for. Pure.

A plan is what engines start from: `server_config()` maps it one to one onto
llama-server's settings (whose flags backends.llama_server.server_args writes).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import get_args

from backends.drafters import KINDS
from backends.llama_server import ServerConfig, server_args
from backends.rollback import INPROC_TARGET_SEQUENCES, costs_state_rows, launch_draft_length, target_snapshots

from ..choices import Goal, KvType
from ..units import format_bytes
from .memory import (
    KV_TYPES,
    Curves,
    Footprint,
    Runtime,
    compute_estimate,
    footprint,
    is_measured,
    kv_bytes_per_cell,
    padded,
)
from .shape import ModelShape

CTX_STEP = 1024
GOALS: tuple[Goal, ...] = get_args(Goal)


@dataclass(frozen=True)
class Option:
    """One target quant or one drafter variant the planner may choose."""

    label: str
    path: str
    shape: ModelShape | None  # None: the MTP head inside the target
    kind: str | None = None  # drafter kind; None for a target
    curves: Curves = ()  # compute buffers measured by llama.cpp

    @property
    def size(self) -> int:
        return self.shape.total_weight_bytes if self.shape else 0


@dataclass(frozen=True)
class Wishes:
    budget: int  # bytes of GPU memory to plan for (0: no GPU)
    goal: Goal = "speed"
    ctx: int | None = None
    kv: KvType | None = None
    min_ctx: int = 16384
    overhead: int = 400 * 2**20
    margin: int = 512 * 2**20
    n_ubatch: int = 512
    ram_available: int | None = None
    n_max: int | None = None  # a draft length the user fixed; None: the kind's, shortened where memory is short
    in_process: bool = False  # the in-process engine (its own state snapshots), not llama-server
    # A DSpine code table on this device (None: host memory; AUTO: where the plan has room).
    code_table_device: str | None = None


# The code_table_device setting's default: the plan puts the table on the GPU where it fits.
AUTO = "auto"
# The device llama.cpp names for the first CUDA GPU (fit plans NVIDIA GPUs: hardware.py).
GPU_DEVICE = "CUDA0"


MEMORY_KEYS = (
    "target_weights",
    "target_kv",
    "recurrent_state",
    "compute",
    "overhead",
    "drafter_weights",
    "drafter_kv",
    "drafter_compute",
)


@dataclass
class Plan:
    target: Option
    drafter: Option | None
    n_ctx: int
    kv: str
    gpu_layers: int
    drafter_gpu_layers: int
    memory: dict[str, int]  # on the GPU, bytes, MEMORY_KEYS plus margin
    ram: dict[str, int]  # in system RAM
    budget: int
    fits: bool
    reasons: list[str] = field(default_factory=list)
    flash_attn: bool = True
    n_ubatch: int = 512
    compute_measured: bool = False  # the target's compute buffer came from llama.cpp's dry run
    drafter_compute_measured: bool = False
    # The launch draft length (--spec-draft-n-max): backends.rollback.launch_draft_length, as the engines.
    draft_n_max: int = 0
    state_copies: int = 1  # copies of the target's recurrent state per sequence (1 + snapshots)
    code_table_device: str | None = None  # a DSpine code table on this device (None: host memory)

    @property
    def total(self) -> int:
        return sum(self.memory.values())

    @property
    def headroom(self) -> int:
        return self.budget - self.total

    @property
    def _has_code_table(self) -> bool:
        drafter = self.drafter
        return drafter is not None and drafter.shape is not None and drafter.shape.code_table_bytes > 0

    def server_config(self) -> ServerConfig:
        drafter = self.drafter
        return ServerConfig(
            model=self.target.path,
            draft_model=drafter.path if drafter is not None and drafter.shape is not None else None,
            drafter_kind=drafter.kind if drafter is not None else None,
            n_ctx=self.n_ctx,
            gpu_layers=self.gpu_layers,
            draft_gpu_layers=self.drafter_gpu_layers,
            kv=self.kv,
            flash_attn=self.flash_attn,
            n_max=self.draft_n_max or None,
            n_ubatch=self.n_ubatch,
            code_table_device=self.code_table_device,
        )

    def server_args(self) -> list[str]:
        return server_args(self.server_config())

    def to_json(self) -> dict:
        return {
            "settings": {
                "target_file": self.target.path,
                "target_quant": self.target.label,
                "drafter": self.drafter.label if self.drafter else None,
                "drafter_kind": self.drafter.kind if self.drafter else None,
                "drafter_file": self.drafter.path if self.drafter and self.drafter.shape else None,
                "context": self.n_ctx,
                "kv_type": self.kv,
                "flash_attention": self.flash_attn,
                "gpu_layers": self.gpu_layers,
                "drafter_gpu_layers": self.drafter_gpu_layers,
                "draft_n_max": self.draft_n_max,
                "recurrent_state_copies": self.state_copies,
                "n_ubatch": self.n_ubatch,
                # A DSpine drafter's code table: on this device, "host", or None (no code table).
                "code_table": (self.code_table_device or "host") if self._has_code_table else None,
            },
            "memory": {**self.memory, "total": self.total},
            "ram": self.ram,
            "budget": self.budget,
            "fits": self.fits,
            "headroom": self.headroom,
            "reasons": self.reasons,
            "llama_server_args": self.server_args(),
        }


def is_hybrid(option: Option) -> bool:
    return bool(option.shape and option.shape.recurrent_layers)


def draft_length(target: Option, drafter: Option | None, wishes: Wishes, memory_cap: int | None = None) -> int:
    """The length the engine will be launched with for this pair: the one function the
    engines call too (backends.rollback.launch_draft_length)."""
    if drafter is None and not wishes.in_process:
        return 0
    return launch_draft_length(
        drafter.kind if drafter else None,
        is_hybrid(target),
        in_process=wishes.in_process,
        asked=wishes.n_max,
        memory_cap=memory_cap,
    )


def target_outputs(n_max: int) -> int:
    """Logit rows the target reserves: one, plus the draft it verifies."""
    return 1 + n_max


def drafter_outputs(drafter: Option, n_max: int | None = None) -> int:
    """Logit rows a block drafter reserves: its whole draft at once (1 otherwise)."""
    kind = KINDS.get(drafter.kind or "")
    return 1 + (n_max or kind.n_max) if kind is not None and kind.block else 1


def _window(drafter: Option) -> int | None:
    kind = KINDS.get(drafter.kind or "")
    return kind.window if kind else None


def _drafter_usage(
    target: Option, drafter: Option | None, runtime: Runtime, n_max: int, code_table_device: str | None = None
) -> dict[str, int]:
    if drafter is None:
        return {"drafter_weights": 0, "drafter_kv": 0, "drafter_compute": 0}
    t = target.shape
    assert t is not None
    if drafter.shape is None:  # MTP: the target's own nextn blocks, one more KV block, its own context
        block = t.kv_layers[-1] if t.kv_layers else 0
        mtp_runtime = replace(runtime, n_outputs=drafter_outputs(drafter, n_max), n_rs_seq=0)
        return {
            "drafter_weights": t.nextn_bytes,
            "drafter_kv": padded(runtime.n_ctx) * kv_bytes_per_cell(t, runtime, block) * max(1, t.n_layer_nextn),
            "drafter_compute": compute_estimate(t, mtp_runtime),
        }
    draft_runtime = replace(
        runtime,
        gpu_layers=None,
        window=_window(drafter),
        n_rs_seq=0,  # llama-server gives the drafter's own context no snapshots (common.cpp)
        n_seq=1,
        n_outputs=drafter_outputs(drafter, n_max),
        code_table_on_gpu=code_table_device is not None,
    )
    used = footprint(drafter.shape, draft_runtime, drafter.curves)
    return {
        "drafter_weights": used.weights.gpu,
        "drafter_kv": used.kv.gpu,
        "drafter_compute": used.compute + used.recurrent.gpu,
    }


def assess(
    target: Option,
    drafter: Option | None,
    n_ctx: int,
    kv: str,
    wishes: Wishes,
    gpu_layers: int | None = None,
    n_max: int | None = None,
) -> Plan:
    """Every byte of one configuration; `n_max`: the launch draft length (None: draft_length's)."""
    shape = target.shape
    assert shape is not None
    all_layers = shape.n_layer + 1
    ngl = all_layers if gpu_layers is None else gpu_layers
    if n_max is None:
        n_max = draft_length(target, drafter, wishes)
    kind = drafter.kind if drafter else None
    snapshots = target_snapshots(kind, n_max, is_hybrid(target), wishes.in_process)
    runtime = Runtime(
        n_ctx=n_ctx,
        type_k=kv,
        type_v=kv,
        n_ubatch=wishes.n_ubatch,
        gpu_layers=ngl,
        n_outputs=target_outputs(n_max if drafter else 0),
        n_seq=INPROC_TARGET_SEQUENCES if wishes.in_process and is_hybrid(target) else 1,
        n_rs_seq=snapshots,
    )
    used = footprint(shape, runtime, target.curves)
    on_gpu = wishes.budget > 0 and ngl > 0
    plan = Plan(
        target=target,
        drafter=drafter if on_gpu else None,
        n_ctx=n_ctx,
        kv=kv,
        gpu_layers=ngl if on_gpu else 0,
        drafter_gpu_layers=(drafter.shape.n_layer + 1) if (on_gpu and drafter and drafter.shape) else 0,
        memory=_gpu_memory(used, on_gpu, target, drafter, runtime, n_max, wishes),
        ram=_ram(used, on_gpu),
        budget=wishes.budget,
        fits=False,
        n_ubatch=wishes.n_ubatch,
        compute_measured=is_measured(runtime, target.curves),
        draft_n_max=n_max if drafter and on_gpu else 0,
        state_copies=(1 + snapshots) if shape.recurrent_layers else 1,
        code_table_device=wishes.code_table_device,
        drafter_compute_measured=bool(
            drafter
            and drafter.shape
            and is_measured(replace(runtime, n_outputs=drafter_outputs(drafter, n_max)), drafter.curves)
        ),
    )
    if on_gpu:
        plan.fits = plan.total <= wishes.budget
    else:
        plan.fits = wishes.ram_available is None or sum(plan.ram.values()) <= wishes.ram_available
    return plan


def _gpu_memory(
    used: Footprint,
    on_gpu: bool,
    target: Option,
    drafter: Option | None,
    runtime: Runtime,
    n_max: int,
    wishes: Wishes,
) -> dict[str, int]:
    """Bytes on the GPU, by MEMORY_KEYS plus the margin: compute, overhead, the drafter and the
    margin count only when the plan uses the GPU."""
    return {
        "target_weights": used.weights.gpu,
        "target_kv": used.kv.gpu,
        "recurrent_state": used.recurrent.gpu,
        "compute": used.compute if on_gpu else 0,
        "overhead": wishes.overhead if on_gpu else 0,
        # A drafter only pays when target and drafter both sit on the GPU.
        **_drafter_usage(target, drafter if on_gpu else None, runtime, n_max, wishes.code_table_device),
        "margin": wishes.margin if on_gpu else 0,
    }


def _ram(used: Footprint, on_gpu: bool) -> dict[str, int]:
    """Bytes in system RAM: what is not on the GPU, and the compute buffer of a CPU plan."""
    return {
        "target_weights": used.weights.cpu,
        "target_kv": used.kv.cpu,
        "recurrent_state": used.recurrent.cpu,
        "compute": 0 if on_gpu else used.compute,
    }


def max_context(target: Option, drafter: Option | None, kv: str, wishes: Wishes, n_max: int | None = None) -> int:
    """The largest context (a multiple of 1,024, at most the trained one) with
    everything on the GPU; 0 when not even 1,024 fits."""
    shape = target.shape
    assert shape is not None
    ceiling = max(shape.n_ctx_train // CTX_STEP, 1)
    low, high = 0, ceiling
    while low < high:
        mid = (low + high + 1) // 2
        if assess(target, drafter, mid * CTX_STEP, kv, wishes, n_max=n_max).fits:
            low = mid
        else:
            high = mid - 1
    return low * CTX_STEP


def shorter_draft(
    target: Option, drafter: Option | None, kv: str, wishes: Wishes, needed: int
) -> tuple[int, int] | None:
    """(launch draft length, context) where the full length leaves less than `needed`: the
    longest shorter length with which it fits. Only where each step of draft length is one
    more copy of a hybrid target's recurrent state (and the user fixed no length)."""
    if drafter is None or wishes.n_max or not costs_state_rows(drafter.kind, is_hybrid(target), wishes.in_process):
        return None
    for n_max in range(draft_length(target, drafter, wishes) - 1, 0, -1):
        top = max_context(target, drafter, kv, wishes, n_max=n_max)
        if top >= needed:
            return n_max, top
    return None


def _drafter_order(drafters: list[Option]) -> list[Option | None]:
    ranked = sorted(drafters, key=lambda d: (KINDS[d.kind].rank if d.kind in KINDS else 9, -d.size))
    return [*ranked, None]


def _kv_order(wishes: Wishes) -> list[str]:
    if wishes.kv:
        return [wishes.kv]
    return ["f16", "q8_0"] if wishes.goal == "speed" else list(KV_TYPES)


def _k(n: int) -> str:
    return f"{n // 1024}K" if n % 1024 == 0 else str(n)


def _name(option: Option | None) -> str:
    return "no drafter" if option is None else option.label


def _max_partial_layers(target: Option, n_ctx: int, kv: str, wishes: Wishes) -> int:
    shape = target.shape
    assert shape is not None
    low, high = 0, shape.n_layer + 1
    while low < high:
        mid = (low + high + 1) // 2
        if assess(target, None, n_ctx, kv, wishes, gpu_layers=mid).fits:
            low = mid
        else:
            high = mid - 1
    return low


def plan(targets: list[Option], drafters: list[Option], wishes: Wishes) -> Plan:
    """`targets` in order of preference (the default quant first); `drafters` any order."""
    if wishes.code_table_device != AUTO:
        return _plan(targets, drafters, wishes)
    host = _plan(targets, drafters, replace(wishes, code_table_device=None))
    table = _code_table_bytes(host)
    if not table:
        return host
    device = _plan(targets, drafters, replace(wishes, code_table_device=GPU_DEVICE))
    return _placed(host, device, table, wishes)


def _code_table_bytes(chosen: Plan) -> int:
    drafter = chosen.drafter
    if chosen.budget <= 0 or drafter is None or drafter.kind != "dspine" or drafter.shape is None:
        return 0
    return drafter.shape.code_table_bytes


def _placed(host: Plan, device: Plan, table: int, wishes: Wishes) -> Plan:
    """A DSpine drafter's code table on the GPU where the plan has room for it, else in host
    memory; a line says which and why. Room: the same models and KV type, and, for speed, a
    context no shorter than the minimum the plan keeps (on an H200 a draft pass that read its
    codes from host memory was 2.85x slower, 1.3-1.8 ms against 0.5 ms); for context, none of
    it given up."""
    fits = device.fits and device.drafter_gpu_layers > 0
    given_up = [
        f"the {mine} {what}"
        for what, mine, theirs in (
            ("target", host.target.label, device.target.label),
            ("drafter", _name(host.drafter), _name(device.drafter)),
            ("KV cache", host.kv, device.kv),
        )
        if mine != theirs
    ]
    floor = host.n_ctx if wishes.goal == "context" else min(host.n_ctx, wishes.ctx or wishes.min_ctx)
    if fits and not given_up and device.n_ctx >= floor:
        cost = f", {host.n_ctx - device.n_ctx:,} tokens of context" if device.n_ctx < host.n_ctx else ""
        device.reasons.append(
            f"The DSpine code table ({format_bytes(table)}{cost}) goes on the GPU ({GPU_DEVICE}): a draft "
            "pass reads its codes there rather than from host memory."
        )
        return device
    if not fits:
        why = "it does not fit beside the rest"
    elif given_up:
        why = "there, the plan would give up " + " and ".join(given_up)
    else:
        why = f"it would cost {host.n_ctx - device.n_ctx:,} tokens of context"
    host.reasons.append(
        f"The DSpine code table ({format_bytes(table)}) stays in host memory ({why}): a draft pass "
        "reads its codes from there, slower than from the GPU."
    )
    return host


def _plan(targets: list[Option], drafters: list[Option], wishes: Wishes) -> Plan:
    if wishes.goal not in GOALS:
        raise ValueError(f"goal must be one of {GOALS}")
    drafter_order = _drafter_order(drafters)
    kv_order = _kv_order(wishes)
    first = targets[0]
    assert first.shape is not None

    if wishes.budget <= 0:
        return _cpu_plan(first, kv_order, wishes)

    trade = _trade_off(first, drafter_order, kv_order, wishes)
    if wishes.goal == "speed" or wishes.ctx:
        chosen = _plan_for_speed(targets, drafter_order, kv_order, wishes)
    else:
        chosen = _plan_for_context(first, drafter_order, kv_order, wishes)
    if chosen is None:
        chosen = _partial_plan(first, kv_order, wishes)
    chosen.reasons.append("With " + first.label + ": " + "; ".join(trade) + " of context.")
    _explain(chosen, kv_order, wishes)
    return chosen


def _cpu_plan(first: Option, kv_order: list[str], wishes: Wishes) -> Plan:
    """No GPU: the first target in system RAM, without a drafter."""
    assert first.shape is not None
    n_ctx = wishes.ctx or min(first.shape.n_ctx_train, 8192)
    cpu = assess(first, None, n_ctx, kv_order[0], wishes, gpu_layers=0)
    cpu.reasons.append("No NVIDIA GPU found: this is a CPU plan (everything in system RAM, no drafter).")
    cpu.reasons.append("Plan for a GPU you do not have here with --vram, e.g. --vram 24GiB.")
    return cpu


def _trade_off(first: Option, drafter_order: list[Option | None], kv_order: list[str], wishes: Wishes) -> list[str]:
    """What each drafter leaves for context with the first target: the trade-off in words."""
    ceilings = {id(d): max_context(first, d, kv_order[0], wishes) for d in drafter_order}
    return [
        # ("no drafter does not fit" read as a drafter that does not: the target alone is meant)
        f"{_name(d) if d is not None or ceilings[id(d)] else 'the target alone'} "
        + (f"leaves {_k(ceilings[id(d)])}" if ceilings[id(d)] else "does not fit, even at 1K")
        for d in drafter_order
    ]


def _plan_for_speed(
    targets: list[Option], drafter_order: list[Option | None], kv_order: list[str], wishes: Wishes
) -> Plan | None:
    """Goal speed (or a context the user fixed): the first target, then the best drafter, that
    leave the context needed; None when no pair does."""
    for target in targets:
        assert target.shape is not None
        needed = min(wishes.ctx or wishes.min_ctx, target.shape.n_ctx_train)
        for drafter in drafter_order:
            chosen = _pair_plan(target, drafter, kv_order, wishes, needed)
            if chosen is not None:
                chosen.reasons.append(_speed_reason(chosen, wishes))
                return chosen
    return None


def _speed_reason(chosen: Plan, wishes: Wishes) -> str:
    assert chosen.target.shape is not None
    trained = chosen.target.shape.n_ctx_train
    why = (
        f"the best drafter that fits at {_k(wishes.ctx)} context"
        if wishes.ctx
        else f"the best drafter that leaves at least {_k(min(wishes.min_ctx, trained))} "
        f"of context; then the largest context that fits ({_k(chosen.n_ctx)})"
    )
    return f"Goal speed: {chosen.target.label} with {_name(chosen.drafter)}, {why}."


def _pair_plan(target: Option, drafter: Option | None, kv_order: list[str], wishes: Wishes, needed: int) -> Plan | None:
    """This target with this drafter at `needed` context or more: the first KV type that
    leaves it at the full draft length, else the first with a shorter draft; None if neither."""
    for kv in kv_order:
        top = max_context(target, drafter, kv, wishes)
        if top >= needed:
            return assess(target, drafter, wishes.ctx or top, kv, wishes)
    # Memory short: one step of draft length less is one state copy less.
    for kv in kv_order:
        shorter = shorter_draft(target, drafter, kv, wishes, needed)
        if shorter:
            n_max, top = shorter
            chosen = assess(target, drafter, wishes.ctx or top, kv, wishes, n_max=n_max)
            full = draft_length(target, drafter, wishes)
            chosen.reasons.append(_shortened(chosen, full, max_context(target, drafter, kv, wishes)))
            return chosen
    return None


def _plan_for_context(
    first: Option, drafter_order: list[Option | None], kv_order: list[str], wishes: Wishes
) -> Plan | None:
    """Goal context: the longest context the first target reaches with any drafter and KV type;
    None when not even 1K fits."""
    # Context comes from the KV type and the drafter, not from a worse quant.
    tops = [
        (max_context(first, drafter, kv, wishes), rank, precision, drafter, kv)
        for rank, drafter in enumerate(drafter_order)
        for precision, kv in enumerate(kv_order)
    ]
    longest = max(top for top, *_ in tops)
    if not longest:
        return None
    # Within 5% of the longest context, a better drafter and a finer KV cache win.
    top, _, _, drafter, kv = min((t for t in tops if t[0] >= 0.95 * longest), key=lambda t: (t[1], t[2]))
    chosen = assess(first, drafter, top, kv, wishes)
    chosen.reasons.append(
        f"Goal context: the longest context that fits is {_k(longest)}; {_k(top)} with {_name(drafter)} "
        f"and a {kv} KV cache is within 5% of it."
    )
    return chosen


def _partial_plan(first: Option, kv_order: list[str], wishes: Wishes) -> Plan:
    """Nothing fits whole: as many of the first target's blocks on the GPU as fit, no drafter."""
    assert first.shape is not None
    n_ctx = wishes.ctx or min(first.shape.n_ctx_train, 8192)
    layers = _max_partial_layers(first, n_ctx, kv_order[-1], wishes)
    chosen = assess(first, None, n_ctx, kv_order[-1], wishes, gpu_layers=layers)
    chosen.reasons.append(
        f"{first.label} does not fit whole: {max(layers - 1, 0)} of {first.shape.n_layer} blocks on the GPU, "
        "the rest run from system RAM. That costs more than any drafter gains, so the drafter is off."
    )
    return chosen


def _shortened(chosen: Plan, full: int, full_ctx: int) -> str:
    shape = chosen.target.shape
    assert shape is not None and chosen.drafter is not None
    return (
        f"Draft length {chosen.draft_n_max}, not {chosen.drafter.kind}'s {full}: on this hybrid target every "
        f"drafted token keeps one more copy of the recurrent state ({format_bytes(shape.rs_bytes_per_row)}); "
        + (f"at {full} only {_k(full_ctx)} of context fits" if full_ctx else f"at {full} not even 1K fits")
        + f", at {chosen.draft_n_max} {_k(chosen.n_ctx)} does."
    )


def _explain(chosen: Plan, kv_order: list[str], wishes: Wishes) -> None:
    shape = chosen.target.shape
    assert shape is not None
    runtime = Runtime(n_ctx=chosen.n_ctx, type_k=chosen.kv, type_v=chosen.kv)
    per_token = sum(kv_bytes_per_cell(shape, runtime, b) for b in shape.kv_layers)
    chosen.reasons.append(
        f"KV cache {chosen.kv}: {format_bytes(per_token)} per token of context"
        + (
            f" ({len(shape.kv_layers)} of {shape.n_layer} blocks keep one)"
            if len(shape.kv_layers) < shape.n_layer
            else ""
        )
        + "."
    )
    if shape.recurrent_layers:
        chosen.reasons.append(
            f"{len(shape.recurrent_layers)} Gated-DeltaNet blocks keep a fixed recurrent state of "
            f"{format_bytes(shape.rs_bytes_per_row)} that does not grow with context."
        )
    if shape.recurrent_layers and chosen.state_copies > 1:
        engine = "The in-process engine" if wishes.in_process else "llama-server"
        chosen.reasons.append(
            f"{engine} keeps {chosen.state_copies} copies of that state "
            f"({format_bytes(chosen.memory['recurrent_state'] + chosen.ram['recurrent_state'])}): the live one and "
            f"a snapshot per token of a verify pass ({chosen.state_copies - 1}), to take rejected drafts back; "
            "each step of draft length costs one copy."
        )
    window = _window(chosen.drafter) if chosen.drafter is not None else None
    if chosen.drafter is not None and window:
        chosen.reasons.append(
            f"The {chosen.drafter.kind} drafter's KV cache is capped by its {_k(window)} sliding window."
        )
    if chosen.drafter is not None:
        chosen.reasons.append(
            f"The target verifies {chosen.draft_n_max} drafted tokens per step, so llama-server reserves "
            f"{1 + chosen.draft_n_max} rows of logits, not a whole ubatch's {chosen.n_ubatch}."
        )
    if chosen.drafter is not None and chosen.drafter.shape is not None and not chosen.drafter.curves:
        chosen.reasons.append(
            f"{chosen.drafter.label}: this llama.cpp cannot load its architecture, "
            "so its compute buffer is dspine's estimate."
        )
    if chosen.fits:
        chosen.reasons.append(f"Headroom: {format_bytes(chosen.headroom)} left of {format_bytes(chosen.budget)}.")
    else:
        chosen.reasons.append(
            f"Does not fit: {format_bytes(chosen.total)} needed, {format_bytes(chosen.budget)} available."
        )
