"""The acceptance rules, on small vocabularies."""

import numpy as np
import pytest

from backends.sampling import Sampling
from backends.speculative import History, accept_greedy, accept_sampled, distribution, rows_distributions, sample


def test_greedy_keeps_the_matching_prefix_and_adds_the_targets_token():
    choices = [3, 1, 4, 2]  # target's greedy token after each position
    assert accept_greedy([3, 1, 4], choices).accepted == 3 and accept_greedy([3, 1, 4], choices).next_token == 2
    verdict = accept_greedy([3, 0, 4], choices)
    assert (verdict.accepted, verdict.next_token) == (1, 1)
    assert accept_greedy([0], choices[:2]).accepted == 0


def test_greedy_with_a_presence_penalty_counts_drafts_accepted_earlier_in_the_batch():
    """Row i of a verify batch comes after draft[:i]: with a presence penalty, a drafted
    token that was kept must be penalised in the rows after it, as plain decoding does."""
    sampling = Sampling(temperature=0, presence_penalty=1.5)
    history = History(4)
    history.add([0])  # generated before this step
    rows = np.array([[0.0, 3.0, 2.5, 0.0], [0.0, 3.0, 2.5, 0.0]])
    probs = rows_distributions(rows, sampling, history, [1])
    # Row 0: token 1 not yet generated -> 1. Row 1 follows the drafted 1 -> penalised -> 2.
    assert [int(np.argmax(p)) for p in probs] == [1, 2]
    # Plain decoding, position by position, gives the same.
    plain = []
    for row in rows:
        plain.append(int(np.argmax(distribution(row, sampling, history.seen))))
        history.add([plain[-1]])
    assert plain == [1, 2]


def test_distribution_applies_top_k_top_p_min_p_and_penalties():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    p = distribution(logits, Sampling(temperature=1.0, top_k=2, top_p=1.0))
    assert np.allclose(p, [0.625, 0.375, 0, 0])
    p = distribution(logits, Sampling(temperature=1.0, top_k=0, top_p=0.7))
    assert np.allclose(p, [0.625, 0.375, 0, 0])
    p = distribution(logits, Sampling(temperature=1.0, top_k=0, top_p=1.0, min_p=0.2))
    assert np.allclose(p, np.array([0.5, 0.3, 0.15, 0]) / 0.95)
    penalised = distribution(
        logits, Sampling(temperature=1.0, top_k=0, top_p=1.0, presence_penalty=10), seen=np.array([0])
    )
    assert penalised[0] < 1e-4
    assert distribution(logits, Sampling(temperature=0))[0] == 1.0


def test_rejection_sampling_keeps_the_targets_distribution():
    """Drafting from q and verifying against p must give tokens distributed as p."""
    rng = np.random.default_rng(0)
    p = np.array([0.5, 0.2, 0.2, 0.1])
    q = np.array([0.1, 0.1, 0.4, 0.4])  # a poor drafter
    draws = 40_000
    counts = np.zeros(4)
    accepted = 0
    for _ in range(draws):
        token = sample(q, rng)
        verdict = accept_sampled([token], [q], [p, p], rng)
        first = token if verdict.accepted == 1 else verdict.next_token
        accepted += verdict.accepted
        counts[first] += 1
    observed = counts / draws
    # Chi-square against p: 3 degrees of freedom, 99.9% quantile 16.27.
    chi2 = float(((counts - draws * p) ** 2 / (draws * p)).sum())
    assert chi2 < 16.27, (observed, chi2)
    # The acceptance rate is sum(min(p, q)) = 0.1 + 0.1 + 0.2 + 0.1 = 0.5.
    assert accepted / draws == pytest.approx(0.5, abs=0.01)


def test_perfect_drafter_is_always_accepted():
    rng = np.random.default_rng(1)
    p = np.array([0.7, 0.2, 0.1])
    for _ in range(200):
        token = sample(p, rng)
        assert accept_sampled([token], [p], [p, p], rng).accepted == 1
