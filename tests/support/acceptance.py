"""Acceptance statistics made to order, for the adaptive draft length's tests."""

from backends.adaptive import ModeStats


def learned(profile: list[float], steps: int = 400) -> ModeStats:
    """Feed `steps` verify steps whose position-i acceptance follows `profile` exactly."""
    stats = ModeStats()
    tested, kept = [0] * 16, [0] * 16
    reach = float(steps)
    for i, a in enumerate(profile):
        tested[i] = round(reach)
        kept[i] = round(reach * a)
        reach *= a
    stats.add(tested, kept, draft_s=0.001 * 16 * steps, drafted=16 * steps, verify_s=0.028 * steps, steps=steps)
    return stats
