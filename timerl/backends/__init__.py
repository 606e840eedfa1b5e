"""Array backends behind a small protocol: torch and jax."""
