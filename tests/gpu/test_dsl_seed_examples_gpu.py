"""The design seed's DSL examples (tests/test_dsl_seed_examples.py) on device memory:
ranks as processes sharing one GPU (or one GPU each where there are several) run each
example's checked plan through comm.execute on CuPy arrays, three calls back to back
at 32 bytes and 2.5 MiB a chunk, and check every output against numpy. The
SwitchChannel examples run glres on device memory (kernels reading the peers'
memory; no multicast object). Skipped where cupy or a GPU is missing."""

import pytest

from _support import cupy_gpus

cp, _GPUS = cupy_gpus()

from test_dsl_seed_examples import ANY_RANKS, LARGE, SMALL, TWO_RANK, run_on_ranks  # noqa: E402

# CUDA's start-up in every rank, on a GPU the ranks share
TIMEOUT = 240


def test_two_rank_examples_on_device_memory(tmp_path):
    """Synchronisation, both SwitchChannel allreduces, the semaphore pipeline and the
    Loop pipeline's ring, on two processes."""
    out = run_on_ranks(tmp_path, TWO_RANK + ANY_RANKS, 2, (SMALL, LARGE), gpu=True, timeout=TIMEOUT)
    assert out.count(" ok ") == 2, out


@pytest.mark.parametrize("n", range(3, 9))
def test_loop_pipeline_on_device_memory(tmp_path, n):
    """The Loop pipeline's ring on 3 to 8 processes sharing the GPU, several windows
    of its 1 MiB unit per chunk."""
    out = run_on_ranks(tmp_path, ANY_RANKS, n, (SMALL, LARGE), gpu=True, timeout=TIMEOUT)
    assert out.count(" ok ") == n, out
