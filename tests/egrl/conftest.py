"""One torch thread: the machine's cores are shared, and small eager kernels only lose time to a thread pool."""

import torch

torch.set_num_threads(1)
