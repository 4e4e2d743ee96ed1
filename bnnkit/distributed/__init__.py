"""Distributed sampling on ``torch.distributed``: data-parallel and chain-parallel SG-MCMC.

Launch a script with ``torchrun`` (gloo on CPUs, NCCL on GPUs)::

    torchrun --standalone --nproc_per_node=2 examples/torchrun_sgld.py

and in the script::

    import bnnkit
    from bnnkit import distributed as bd
    from bnnkit.data import Minibatches

    info = bd.init_from_env()                      # reads RANK, WORLD_SIZE, ... from torchrun
    post = bnnkit.Posterior(net, bnnkit.Gaussian(0.1), bnnkit.GaussianPrior(1.0), num_data=N)

    # Data-parallel: each rank holds a shard; gradients are all-reduced every step.
    shard = bd.ShardedMinibatches.from_full(x, y, batch_size=64)
    samples = bnnkit.sample(bnnkit.SGLD(1e-4), bd.data_parallel(post), shard,
                            num_samples=200, seed=0, progress=info.is_main)

    # Chain-parallel: chains spread over ranks, draws gathered on rank 0.
    samples = bd.chain_parallel_sample(bnnkit.SGLD(1e-4), post, Minibatches(x, y, batch_size=64),
                                       num_chains=4, num_samples=200, seed=0, progress=False)

Data-parallel runs equal the single-process run on the same global minibatches (to float
rounding); chain-parallel runs equal the single-process run of all chains.  See
``docs/distributed.md``.
"""

from .chains import chain_parallel_sample, chains_of_rank
from .data import ShardBatch, ShardedMinibatches, shard_range
from .data_parallel import DataParallelPosterior, DataParallelTarget, data_parallel
from .launch import (
    DEFAULT_TIMEOUT_S,
    DistInfo,
    DistributedError,
    default_backend,
    describe,
    init_from_env,
    shutdown,
)

__all__ = [
    "init_from_env",
    "describe",
    "shutdown",
    "default_backend",
    "DistInfo",
    "DistributedError",
    "DEFAULT_TIMEOUT_S",
    "ShardedMinibatches",
    "ShardBatch",
    "shard_range",
    "data_parallel",
    "DataParallelPosterior",
    "DataParallelTarget",
    "chain_parallel_sample",
    "chains_of_rank",
]
