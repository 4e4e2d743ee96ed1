"""Every gradient-based and random-walk sampler against a logistic posterior computed by quadrature."""

import pytest
import torch

import bnnkit
from bnnkit.diagnostics import ess
from bnnkit.predict import predict
from tests.helpers import assert_gaussian_matches
from tests.reference_logistic import logistic_reference

REF = logistic_reference()
SAMPLERS = {
    "hmc": (bnnkit.HMC(step_size=0.2, num_steps=6), 1500),
    "nuts": (bnnkit.NUTS(), 1000),
    "rwmh": (bnnkit.RandomWalkMH(step_size=0.5), 5000),
}


# hmc: covered fast by the nuts case (the same non-Gaussian target) and
# tests/samplers/test_conjugate_all.py::test_sampler_recovers_conjugate_posterior_and_predictive[hmc]
@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.slow) if n == "hmc" else n for n in SAMPLERS]
)
@pytest.mark.slow  # over 8 s: the default run stays under 3 min
def test_sampler_matches_quadrature_posterior(name):
    algo, n = SAMPLERS[name]
    post = REF.posterior()
    s = bnnkit.sample(
        algo, post, (REF.X, REF.y), num_samples=n, num_warmup=500, num_chains=2, seed=2, progress=False
    )
    # flat layout is (weight, bias), like the reference
    assert_gaussian_matches(s.positions, REF.mean, REF.cov)
    # predictive probabilities within Monte-Carlo error of the quadrature predictive
    pred = predict(post, s, REF.x_test[:, None])
    f = torch.sigmoid(s.flat() @ torch.stack([REF.x_test, torch.ones_like(REF.x_test)]))
    e = torch.as_tensor(ess(f.reshape(2, -1, 4)))
    se = f.std(0) / e.sqrt()
    assert ((pred.probs[:, 1] - REF.p_test).abs() < 4 * se + 1e-4).all()


def test_reference_is_not_gaussian_noise():
    # sanity: the quadrature reference is a proper, informative posterior
    assert REF.cov[0, 0] < 0.6**2 and REF.cov[1, 1] < 0.6**2
    assert torch.linalg.eigvalsh(REF.cov).min() > 0
