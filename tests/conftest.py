import warnings

import pytest
import torch

warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(2)
    yield
