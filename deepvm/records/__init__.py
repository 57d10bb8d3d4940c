"""What the store holds, as domain objects (docs/ARCHITECTURE.md, "Layers"):
planning inputs read from the store, planner results as store rows, the
registered jobs file, and the jobs that run."""
