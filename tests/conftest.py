from pathlib import Path

import pytest
import torch

from tests import forked

# the networks in the unit tests are small: one thread is fastest, and it does not fight the
# smoke runs' subprocesses (or a sweep on the same machine) for the cores
torch.set_num_threads(1)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory):
    """`shared_run(script, *flags)`: the run folder of `python script --runs-dir ... *flags` (forked: tests/forked.py),
    run the first time this test process asks for it; several tests read one run (tests/reference.py)."""
    done = {}

    def get(script, *flags):
        if (script, *flags) not in done:
            folder = tmp_path_factory.mktemp("shared")
            done[(script, *flags)] = folder, forked.run([ROOT / script, "--runs-dir", folder / "runs", *flags], folder)
        folder, proc = done[(script, *flags)]
        assert proc.returncode == 0, proc.stderr[-3000:]
        (run_dir,) = (folder / "runs").iterdir()
        return run_dir

    return get
