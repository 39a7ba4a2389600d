"""The acceptance rules, on small vocabularies."""

import numpy as np
import pytest

from backends.sampling import Sampling
from backends.speculative import accept_greedy, accept_sampled, distribution, sample


def test_greedy_keeps_the_matching_prefix_and_adds_the_targets_token():
    logits = np.eye(5)[[3, 1, 4, 2]]  # target's argmax after each position: 3, 1, 4, 2
    assert accept_greedy([3, 1, 4], logits).accepted == 3 and accept_greedy([3, 1, 4], logits).next_token == 2
    verdict = accept_greedy([3, 0, 4], logits)
    assert (verdict.accepted, verdict.next_token) == (1, 1)
    assert accept_greedy([0], logits[:2]).accepted == 0


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
