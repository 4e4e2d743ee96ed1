"""bnnkit.decisions.inputs: the action inputs, the replay buffer and the one-hot context points."""

from pathlib import Path

import pytest
import torch

from bnnkit.core.errors import BnnkitError
from bnnkit.decisions import OneHotContextPoints, ReplayBuffer, action_inputs, one_hot_blocks

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


def test_action_inputs_pair_every_context_with_every_action_action_major():
    ctx = torch.tensor([[0.5, -1.0], [2.0, 3.0]])
    rows = action_inputs(ctx, 3)
    assert rows.shape == (6, 5)
    for a in range(3):
        assert torch.equal(rows[2 * a : 2 * a + 2, :2], ctx)
        assert torch.equal(rows[2 * a : 2 * a + 2, 2:], torch.eye(3)[a].expand(2, 3))


def test_buffer_keeps_the_last_rows_and_samples_only_what_it_holds():
    buf = ReplayBuffer(4, 2)
    for i in range(6):
        buf.add(torch.tensor([float(i), 0.0]), float(i))
    assert buf.size == 4 and sorted(buf.y.tolist()) == [2.0, 3.0, 4.0, 5.0]
    x, y = buf.sample(100, torch.Generator().manual_seed(0))
    assert x.shape == (4, 2) and set(y.tolist()) <= {2.0, 3.0, 4.0, 5.0}
    data = buf.data()
    buf.add(torch.tensor([9.0, 9.0]), 9.0)  # a copy: later additions do not reach it
    assert 9.0 not in data[1].tolist()
    with pytest.raises(BnnkitError, match="capacity must be an integer >= 1"):
        ReplayBuffer(0, 2)


def test_one_hot_blocks_are_found_and_a_non_one_hot_table_is_refused():
    ctx = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]])
    assert one_hot_blocks(ctx) == [(0, 2), (2, 4)]
    with pytest.raises(BnnkitError, match="not a one-hot encoding"):
        one_hot_blocks(torch.tensor([[1.0, 1.0, 0.0]]))


@pytest.mark.skipif(not (DATA / "mushroom").exists(), reason="needs ../shared/data/mushroom")
def test_measurement_points_are_mushrooms_with_both_actions():
    from bnnkit.data.mushroom import load_mushroom

    contexts, _ = load_mushroom(DATA)
    blocks = one_hot_blocks(contexts)
    assert len(blocks) == 22 and blocks[-1][1] == contexts.shape[1]
    points = OneHotContextPoints(blocks, num_batch=4, num_random=5)
    batch = torch.cat([contexts[:10], torch.tensor([[1.0, 0.0]]).expand(10, 2)], 1)
    xm = points.sample(batch, torch.Generator().manual_seed(0))
    assert xm.shape[0] <= 18 and xm.shape[1] == contexts.shape[1] + 2
    assert bool((xm[:, :-2].sum(1) == 22).all()) and bool((xm[:, -2:].sum(1) == 1).all())
    for lo, hi in blocks:
        assert bool((xm[:, lo:hi].sum(1) == 1).all())
    with pytest.raises(BnnkitError, match="draws from a minibatch"):
        points.sample(None, torch.Generator())
