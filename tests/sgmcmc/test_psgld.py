"""Preconditioned SGLD (RMSprop preconditioner) on conjugate Bayesian linear regression."""

import pytest
import torch

import bnnkit
from bnnkit.core.errors import BnnkitError
from bnnkit.data import Minibatches
from bnnkit.sgmcmc import PreconditionedSGLD
from bnnkit.sgmcmc.psgld import hutchinson_hessian_diag
from tests.helpers import linear_problem, sg_errors

PROB = linear_problem(n=100, d=2, sigma=0.5)
RUN = dict(num_samples=3000, thin=3, num_warmup=300, num_chains=1, progress=False, seed=1)


def run(alg, **kw):
    stream = Minibatches(PROB.X, PROB.y, batch_size=10)
    return bnnkit.sample(alg, PROB.posterior(num_data=100), stream, **{**RUN, **kw})


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_psgld_matches_the_posterior_within_stated_error():
    mean_z, cov_rel = sg_errors(run(PreconditionedSGLD(1e-4)).positions, PROB.mean, PROB.cov)
    assert mean_z < 0.3 and cov_rel < 0.25, (mean_z, cov_rel)


@pytest.mark.slow  # over 2.5 s: the default run stays under 3 min
def test_vectorised_psgld_chains_match_the_posterior_and_the_correction_is_refused():
    """pSGLD is elementwise in every chain's own gradient and V, so K chains run as one stacked
    computation; the Hessian-diagonal correction (one chain's Hessian-vector product) does not."""
    s = run(
        PreconditionedSGLD(1e-4), num_samples=750, num_warmup=3000, num_chains=4, chain_method="vectorized"
    )
    mean_z, cov_rel = sg_errors(s.positions, PROB.mean, PROB.cov)
    assert mean_z < 0.3 and cov_rel < 0.25, (mean_z, cov_rel)
    with pytest.raises(BnnkitError, match="correction=True.*sequential"):
        run(PreconditionedSGLD(1e-4, correction=True), num_samples=5, num_chains=2, chain_method="vectorized")


@pytest.mark.slow  # over 3 s: the default run stays under 3 min
def test_psgld_with_correction_term_matches_too():
    s = run(PreconditionedSGLD(1e-4, correction=True), num_samples=1500)
    mean_z, cov_rel = sg_errors(s.positions, PROB.mean, PROB.cov)
    assert mean_z < 0.3 and cov_rel < 0.25, (mean_z, cov_rel)


def test_hutchinson_estimate_of_the_hessian_diagonal_is_unbiased():
    target = PROB.posterior(num_data=100).target()
    batch = (PROB.X, PROB.y)
    exact = -(PROB.X.pow(2).sum(0) / PROB.sigma**2 + 1.0)  # diag of -(X^T X / s^2 + I)
    gen = torch.Generator().manual_seed(0)
    x = torch.zeros(2, dtype=torch.float64)
    est = torch.stack([hutchinson_hessian_diag(target, x, batch, gen) for _ in range(400)])
    se = est.std(0) / 20
    assert bool(((est.mean(0) - exact).abs() < 4 * se + 1e-9).all()), (est.mean(0), exact)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PreconditionedSGLD(0.0), "step_size"),
        (lambda: PreconditionedSGLD(1e-4, alpha=1.0), "alpha"),
        (lambda: PreconditionedSGLD(1e-4, delta=0.0), "delta"),
        (lambda: PreconditionedSGLD(1e-4, temperature=-1.0), "temperature"),
    ],
)
def test_bad_hyperparameters(make, message):
    with pytest.raises(BnnkitError, match=message):
        make()


def test_eps_is_the_deprecated_name_of_the_preconditioner_floor_delta():
    """``eps`` is the step size everywhere else; the floor's old keyword and attribute still work."""
    with pytest.warns(DeprecationWarning, match="delta"):
        old = PreconditionedSGLD(1e-4, eps=1e-3)
    assert old == PreconditionedSGLD(1e-4, delta=1e-3) == PreconditionedSGLD(1e-4, 0.99, 1e-3)
    with pytest.warns(DeprecationWarning, match="delta"):
        assert old.eps == 1e-3
    assert old.config()["eps"] == 1e-3  # the stored config keeps its key: older runs resume
    with pytest.warns(DeprecationWarning), pytest.raises(BnnkitError, match="delta"):
        PreconditionedSGLD(1e-4, delta=1e-3, eps=1e-3)
    with pytest.warns(DeprecationWarning), pytest.raises(BnnkitError, match="delta"):
        PreconditionedSGLD(1e-4, eps=0.0)
