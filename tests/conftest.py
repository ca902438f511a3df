import torch

# the networks in the unit tests are small: one thread is fastest, and it does not fight the
# smoke runs' subprocesses (or a sweep on the same machine) for the cores
torch.set_num_threads(1)
