"""Prefect flows for deepvm: thin wrappers whose tasks each call one library function."""
