"""The `local_ray` fixture for the learners' Ray tests, kept out of `tests/conftest.py` so that the engine's tests
import neither Ray nor a learner. A test module uses it with ``from tests.ray_cluster import local_ray``."""

from __future__ import annotations

import pytest
import ray

from algorithms.local_ray import start as local_ray_start


@pytest.fixture(scope="session")
def local_ray():
    """One local Ray (2 CPUs) for every test that needs it, started on first use and shut down at the end of
    the session: starting Ray costs ~25 s, once instead of once per test module."""
    local_ray_start(2)
    yield
    ray.shutdown()
