"""Per-request draft length on llama-server, pure: whether a binary honours it, what
a reply's timings say about acceptance by position, and a step-cost table by draft
length from what requests through the server measured.

Upstream llama-server parses a request's `speculative.n_max` and ignores it;
dspine's patch (installers/patches/llama-server-per-request-draft.patch) makes it
honour `speculative.n_max` / `speculative.n_min`, adds `dspine_per_request_draft`
to `/props`, and per-position tested/kept counts to each reply's timings.
"""

from __future__ import annotations

from pathlib import Path

MARKER = "dspine_per_request_draft"
_CHUNK = 1 << 20


def honoured_by_props(props: dict) -> bool:
    """What a running server says: the patch's marker in `/props`."""
    return props.get(MARKER) is True


_SCANNED: dict[tuple[str, float, int], bool] = {}


def honoured_by_binary(binary: Path) -> bool:
    """Without running it (`dspine doctor`): the marker is a string literal in a
    patched binary. Read once per binary (path, mtime, size)."""
    try:
        stat = binary.stat()
    except OSError:
        return False
    key = (str(binary), stat.st_mtime, stat.st_size)
    if key not in _SCANNED:
        _SCANNED[key] = _contains(binary, MARKER.encode())
    return _SCANNED[key]


def _contains(path: Path, needle: bytes) -> bool:
    tail = b""
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                window = tail + chunk
                if needle in window:
                    return True
                tail = window[-(len(needle) - 1) :]  # a marker split across reads
    except OSError:
        return False
    return False


def positions(timings: dict) -> tuple[list[int], list[int]]:
    """Per draft position: how many steps tested it (every draft token before it kept) and
    kept it, as `stats.count_positions` counts them. Empty when the server does not send
    them (unpatched).

    The patched server counts a position as tested whenever a draft reached it, whatever
    became of the tokens before it. Read that way, acceptance by position falls off as a
    product of products: the adaptive length multiplies the rates along the draft, so it
    judged long drafts far worse than they were (a pair measured at 4.8 tokens a step at
    length 7, predicted at 3.1) and drafted too short. Position i is tested when the
    first i were kept, and that is the server's kept count at i - 1. A draft the floor
    cut short after all its tokens were kept counts as ending there: the next position
    yields no token, as after a rejection, which is what a longer length would get. So
    position 0 is tested on every step: the floor can leave a step with no draft at all
    (a quarter of the steps on the real SmolLM2 pair), and counting only the steps that
    drafted priced every length a third too high."""
    drafts = reached(timings)
    if not drafts:
        return [], []
    kept = [int(n) for n in timings["draft_kept_per_pos"]]
    steps = int(timings.get("predicted_n", 0)) - int(timings.get("draft_n_accepted", 0))
    first = max(steps, drafts[0])
    tested = [max(n, k) for n, k in zip([first, *kept[:-1]], kept, strict=True)]
    return tested, kept


def reached(timings: dict) -> list[int]:
    """Per draft position, how many drafts held a token there, as the patched server counts
    (`positions` turns these into tested counts). Empty when it does not send them."""
    counts = timings.get("draft_tested_per_pos") or []
    return [int(n) for n in counts] if len(counts) == len(timings.get("draft_kept_per_pos") or []) else []


def step_seconds(timings: dict) -> float | None:
    """Time per target step of a reply: each step verifies a draft (or decodes one
    token without one) and yields its kept drafts plus one token of the target's."""
    predicted = int(timings.get("predicted_n", 0))
    steps = predicted - int(timings.get("draft_n_accepted", 0))
    seconds = float(timings.get("predicted_ms", 0.0)) / 1000
    if steps <= 0 or seconds <= 0:
        return None
    return seconds / steps


def mean_draft(timings: dict) -> float:
    """Tokens per draft actually drafted (a drafter may stop short of the length asked)."""
    rounds = int(timings.get("draft_rounds", 0))
    return int(timings.get("draft_n", 0)) / rounds if rounds else 0.0


def step_table(measured: dict[int, float], max_k: int) -> list[float]:
    """Seconds per step at draft length 0..max_k (index k: a pass of k + 1 tokens),
    from the lengths measured, linear between them and flat beyond their ends.
    The adaptive logic reads it as its verify-time table, with drafting folded in."""
    if not measured:
        raise ValueError("no step times measured")
    known = sorted(measured.items())
    table = []
    for k in range(max_k + 1):
        below = [(n, s) for n, s in known if n <= k]
        above = [(n, s) for n, s in known if n >= k]
        if not below:
            table.append(above[0][1])
        elif not above:
            table.append(below[-1][1])
        else:
            (k0, s0), (k1, s1) = below[-1], above[0]
            table.append(s0 if k1 == k0 else s0 + (s1 - s0) * (k - k0) / (k1 - k0))
    return table


def calibration_tokens(k: int) -> int:
    """Tokens a calibration asks for at draft length k: enough for three full drafts. At a
    flat 16 tokens the server cut every draft to what was left of the reply, so lengths
    past 5 or so were timed as shorter ones, and the table said a 17-token pass cost 1.4x
    a 4-token one where use measured 1.9x; adaptive then drafted too long."""
    return max(16, 3 * (k + 1))


def calibration_point(k: int, timings: dict) -> tuple[int, float] | None:
    """The draft length a calibration at length k really drafted (the mean of its drafts:
    the floor or the reply's end can cut them short) and its seconds per step."""
    seconds = step_seconds(timings)
    if seconds is None:
        return None
    drafted = mean_draft(timings)
    return (min(max(round(drafted), 1), k) if drafted > 0 else k), seconds


def calibration_lengths(max_k: int) -> list[int]:
    """The lengths a calibration times: a few, spread out; the table interpolates the rest."""
    picks = {1, 2, 3, 4, 6, 8, 12, 16, max_k}
    return sorted(k for k in picks if 1 <= k <= max_k)


def fallback_note(launch_length: int) -> str:
    return (
        "per-request draft length: not honoured by this llama-server "
        f"(switching think mode keeps the launch length {launch_length})"
    )
