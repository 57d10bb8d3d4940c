import pytest


@pytest.fixture(autouse=True)
def _no_cloud_metadata(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory):
    """Tests never probe link-local metadata addresses; the FLOP cache is per session."""
    monkeypatch.setenv("DEEPVM_METADATA", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.delenv("DEEPVM_STORE", raising=False)
