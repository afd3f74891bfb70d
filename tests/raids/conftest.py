import pytest

from tests.support.helpers import commits


@pytest.fixture(autouse=True)
def _index_builder_held_off_inside_a_test_transaction(request, monkeypatch):
    """A test that saves blocks inside its own transaction (django_db without transaction=True) sees
    them at its first decision, which loads the block index itself. The index's builder thread, which
    a change marker read or a message of the change channel can wake at any moment, reads on its own
    database connection and sees committed rows only: none of this test's. Its build would put an
    index without them in force halfway through the test, so it is held off there. The builder is
    tested with committed rows (test_rebuild.py, test_live.py, and the transactional tests here)."""
    if request.node.get_closest_marker("django_db") is None or commits(request):
        return
    from throttling.engine.countermeasures.in_force import measures

    monkeypatch.setattr(measures, "check_blocks", lambda: None)
