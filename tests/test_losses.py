import math

import pytest
import torch

from dnaembed.errors import DnaembedError
from dnaembed.train.losses import EPS, chi2_nll, get_loss, mse, poisson_nll


def test_chi2_matches_hand_computed_values():
    o = torch.tensor([10.0, 3.0])
    t = torch.tensor([12.0, 4.0])
    expected = [
        6 * math.log(2) + math.lgamma(6) - 5 * math.log(10 + EPS) + 5,
        2 * math.log(2) + math.lgamma(2) - 1 * math.log(3 + EPS) + 1.5,
    ]
    assert chi2_nll(o, t).tolist() == pytest.approx(expected, rel=1e-6)


def test_chi2_optimum_is_the_mode_t_minus_2():
    o = torch.linspace(0.5, 40, 4000)
    loss = chi2_nll(o, torch.full_like(o, 20.0))
    assert float(o[loss.argmin()]) == pytest.approx(18.0, abs=0.02)


def test_poisson_matches_hand_values_and_is_unbiased():
    o = torch.tensor([10.0])
    expected = 10 - 12 * math.log(10 + EPS)
    assert float(poisson_nll(o, torch.tensor([12.0]))) == pytest.approx(expected)
    grid = torch.linspace(0.5, 40, 4000)
    assert float(grid[poisson_nll(grid, torch.full_like(grid, 20.0)).argmin()]) == pytest.approx(
        20.0, abs=0.02)


def test_mse():
    assert mse(torch.tensor([3.0]), torch.tensor([5.0])).item() == 4.0


@pytest.mark.parametrize("name", ["chi2", "poisson", "mse"])
def test_zero_distance_and_zero_prediction_are_finite_with_finite_gradients(name):
    fn = get_loss(name)
    o = torch.tensor([0.0, 1e-9, 0.0, 5.0], requires_grad=True)
    t = torch.tensor([0.0, 0.0, 3.0, 0.0])
    loss = fn(o, t)
    assert torch.isfinite(loss).all()
    loss.sum().backward()
    assert torch.isfinite(o.grad).all()


def test_unknown_loss():
    with pytest.raises(DnaembedError, match="unknown loss 'huber'"):
        get_loss("huber")
