"""The fleet (docs/ARCHITECTURE.md, "The fleet"): every registered job planned at
once under shared quotas and a team budget, running jobs' moves."""
