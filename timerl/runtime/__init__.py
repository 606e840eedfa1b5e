"""Executors: the reference interpreter and the scheduled executor, with stores and the memory pool."""
