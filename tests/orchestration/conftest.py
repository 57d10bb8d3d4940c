import pytest

pytest.importorskip("prefect")


@pytest.fixture(scope="session", autouse=True)
def prefect_harness():
    """One temporary Prefect server (and database) for all flow tests."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield
