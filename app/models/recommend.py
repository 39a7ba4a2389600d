"""The one drafter recommendation: which of a bundle's drafters to pull and use here.

Pure: the catalog entry, what is pulled (read from disk by app/hub/drafter_choice.py) and
the --spec-type names of the llama-server found here in; a variant and why out. The
installer's last line (`dspine doctor --next-step`), `dspine doctor`, `dspine pull`
without --drafter and the chat's first run all ask this one function, so none of them
sends a user to a drafter the server here refuses.

The order: the catalog's default first, then the others by how fast their kind drafts
(backends/drafters.py rank), then as the catalog lists them; the first one this server
runs wins. A drafter the server runs is passed over when its pulled file holds what the
server does not read (a fork's layout, a missing tensor), and an MTP head when the target
file does not carry one. A drafter the catalog gains later just joins the order.
"""

from __future__ import annotations

from dataclasses import dataclass

from backends.drafter_files import FileCheck, runs_kind
from backends.drafters import KINDS

from .catalog import NO_DRAFTER, Bundle, Drafter


@dataclass(frozen=True)
class Pulled:
    """What is on disk of a bundle, as far as the recommendation cares."""

    drafter: str | None = None  # the variant pulled
    drafter_check: FileCheck | None = None  # its header against this server; None: not read
    target_mtp_head: bool | None = None  # the pulled target's last block is an MTP head; None: not here


@dataclass(frozen=True)
class Recommendation:
    drafter: str  # a variant of the bundle, or "none"
    kind: str | None
    why: str  # one sentence for people
    passed_over: tuple[str, ...] = ()  # "variant: reason" for each better one not taken

    @property
    def label(self) -> str:
        found = KINDS.get(self.kind or "")
        return found.label if found and found.label else (self.kind or "no drafter")


def ordered(bundle: Bundle) -> list[Drafter]:
    """The bundle's drafters in the order they are tried."""
    rest = sorted(
        (d for v, d in bundle.drafters.items() if v != bundle.default_drafter),
        key=lambda d: KINDS[d.kind].rank if d.kind in KINDS else len(KINDS),
    )
    first = bundle.drafters.get(bundle.default_drafter)
    return ([first] if first is not None else []) + rest


def _label(kind: str) -> str:
    found = KINDS.get(kind)
    return found.label if found and found.label else kind


def _refusal(bundle: Bundle, drafter: Drafter, spec_types: tuple[str, ...] | None, pulled: Pulled) -> str | None:
    """Why this server cannot draft with it here; None when it can."""
    kind = KINDS.get(drafter.kind)
    if kind is None:
        return f"its kind {drafter.kind!r} is unknown to this dspine"
    if spec_types is None:
        if kind.in_process:
            return None
        return "no llama-server is found here"
    if runs_kind(drafter.kind, spec_types) is None:
        names = " or ".join(kind.spec_types)
        return f"the llama-server found here has no --spec-type {names}"
    if drafter.builtin:
        if pulled.target_mtp_head is None:
            return "whether the target carries an MTP head is read once it is pulled"
        if not pulled.target_mtp_head:
            return "the pulled target file carries no MTP head"
    check = pulled.drafter_check
    if check is not None and not check.runs and pulled.drafter is not None:
        if pulled.drafter == drafter.variant:
            return "its pulled file: " + "; ".join(check.problems())
        refused = bundle.drafters.get(pulled.drafter)
        # Files of one repository share their converter's layout: what refuses one refuses its siblings.
        if refused is not None and refused.repo is not None and refused.repo == drafter.repo:
            return f"from the same repository as {pulled.drafter}, whose pulled file this server refuses"
    return None


def _pulled_first(bundle: Bundle, pulled: Pulled) -> list[Drafter]:
    """The order, with the pulled drafter first where it is of the kind the first choice is: where
    it runs here a second pull fetches nothing; where it does not, why is said first."""
    order = ordered(bundle)
    mine = bundle.drafters.get(pulled.drafter or "")
    if not order or mine is None or mine.kind != order[0].kind or pulled.drafter_check is None:
        return order  # not read (an interrupted pull, a header that did not parse): not "already pulled"
    return [mine] + [d for d in order if d is not mine]


def recommend(bundle: Bundle, spec_types: tuple[str, ...] | None, pulled: Pulled | None = None) -> Recommendation:
    """The drafter to use with `bundle` on a llama-server whose --spec-type knows `spec_types`
    (None: no llama-server found; only what the in-process engine runs then)."""
    pulled = pulled or Pulled()
    passed: list[str] = []
    for drafter in _pulled_first(bundle, pulled):
        refusal = _refusal(bundle, drafter, spec_types, pulled)
        if refusal is not None:
            passed.append(f"{drafter.variant}: {refusal}")
            continue
        if spec_types is None:
            how = "no llama-server is found here, and the in-process engine runs it"
        else:
            how = f"the llama-server found here runs it, --spec-type {runs_kind(drafter.kind, spec_types)}"
        here = ", already pulled" if pulled.drafter == drafter.variant else ""
        return Recommendation(drafter.variant, drafter.kind, f"{_label(drafter.kind)}: {how}{here}", tuple(passed))
    if not bundle.drafters:
        return Recommendation(NO_DRAFTER, None, f"{bundle.name} has no drafter in the catalog")
    why = "none of its drafters runs here" + (
        "; install a llama-server (installers/install.sh --with-server)" if spec_types is None else ""
    )
    return Recommendation(NO_DRAFTER, None, why, tuple(passed))
