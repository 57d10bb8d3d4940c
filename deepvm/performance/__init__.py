"""Performance models (docs/ARCHITECTURE.md, "Layers": domain): FLOPP, the overhead
(speedup) models and their fitting, the sample workloads, and spot preemption."""
