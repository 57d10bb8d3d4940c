"""Renderings (docs/ARCHITECTURE.md, "Layers"): a recommendation as SkyPilot tasks,
reports as Markdown, figures."""
