"""timerl's benchmarks: each module measures timerl against a baseline in the same run (`python -m benchmarks`)."""
