"""Data: minibatch streams for SG-MCMC, the embedded toy set, and benchmark loaders.

Loaders read from a data directory: the ``root`` argument, else ``$BNNKIT_DATA``, else a user
cache directory; with ``download=True`` they fetch from the canonical source and verify checksums.
"""

from .download import data_dir, fetch
from .minibatch import LoaderStream, Minibatches, minibatches
from .mnist import IMAGE_TASKS, load_image_task, load_mnist
from .mushroom import load_mushroom
from .sources import SplitSource, arrays_source, folder_source, kind_source
from .splits import SPLIT_KINDS, gap_splits, tail_splits, write_split_layout
from .toy import load_toy1d, toy1d_function
from .uci import UCI_DATASETS, UCISplit, load_uci, load_uci_columns, uci_num_splits

__all__ = [
    "Minibatches",
    "LoaderStream",
    "minibatches",
    "load_toy1d",
    "toy1d_function",
    "load_uci",
    "load_uci_columns",
    "gap_splits",
    "tail_splits",
    "write_split_layout",
    "SPLIT_KINDS",
    "uci_num_splits",
    "UCISplit",
    "UCI_DATASETS",
    "load_mushroom",
    "load_mnist",
    "load_image_task",
    "IMAGE_TASKS",
    "SplitSource",
    "folder_source",
    "kind_source",
    "arrays_source",
    "data_dir",
    "fetch",
]
