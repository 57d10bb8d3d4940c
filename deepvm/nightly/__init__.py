"""The nightly (docs/ARCHITECTURE.md, "Layers": stages): price refresh, the stages
and their one sequence, and the backtest that replays the nights' prices."""
