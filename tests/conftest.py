import warnings

import pytest
import torch

warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")


@pytest.fixture(autouse=True)
def _threads():
    # The models in the tests are tiny: a second thread only adds synchronisation, and when
    # another process runs beside the suite it makes small ops 10x slower (oversubscription).
    torch.set_num_threads(1)
    yield
