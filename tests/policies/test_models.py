"""ActionPolicy and ActionWindow: what a moderator may save, checked by forms and by the database."""

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

import throttling
from throttling.conf import MAX_BUCKET_SIZE, MAX_LOG_ENTRIES, MAX_PERIOD
from throttling.models import ActionPolicy, ActionWindow

pytestmark = pytest.mark.django_db

PERIOD_TEXT = "between 1 second and 366 days"
ACTION_TEXT = "Use only lowercase letters, digits, hyphens and underscores"


def errors_of(instance):
    with pytest.raises(ValidationError) as caught:
        instance.full_clean()
    return caught.value.message_dict


def test_create_makes_a_working_policy(redis_server):
    ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    decisions = [throttling.check("ann", "reply2") for _ in range(6)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert decisions[0].limit == 5


def test_a_valid_policy_passes_full_clean():
    ActionPolicy(action="send-message_2", period=MAX_PERIOD, max_count=MAX_LOG_ENTRIES).full_clean()
    ActionPolicy(action="x", period=1, max_count=1).full_clean()


@pytest.mark.parametrize("period", [0, MAX_PERIOD + 1, 10 * MAX_PERIOD])
def test_full_clean_refuses_a_period_out_of_range(period):
    errors = errors_of(ActionPolicy(action="reply2", period=period, max_count=5))
    assert PERIOD_TEXT in " ".join(errors["period"])


@pytest.mark.parametrize("algorithm", ["sliding_log", "token_bucket"])
@pytest.mark.parametrize("max_count", [0, MAX_BUCKET_SIZE + 1])
def test_full_clean_refuses_a_max_count_out_of_range(max_count, algorithm):
    errors = errors_of(ActionPolicy(action="reply2", period=60, max_count=max_count, algorithm=algorithm))
    assert f"between 1 and {MAX_BUCKET_SIZE:,}" in " ".join(errors["max_count"])


@pytest.mark.parametrize("max_count", [MAX_LOG_ENTRIES + 1, MAX_BUCKET_SIZE])
def test_a_sliding_log_above_its_cap_is_refused_with_the_reason(max_count):
    errors = errors_of(ActionPolicy(action="reply2", period=60, max_count=max_count))
    text = " ".join(errors["max_count"])
    assert f"at most {MAX_LOG_ENTRIES:,}" in text
    # The cap is explained, and the way out named.
    assert "memory" in text and "remembers" in text and "token bucket" in text
    ActionPolicy(action="reply2", period=60, max_count=max_count, algorithm="token_bucket").full_clean()


def test_the_database_refuses_a_sliding_log_above_its_cap_however_it_is_written():
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.bulk_create([ActionPolicy(action="bulk", period=60, max_count=MAX_LOG_ENTRIES + 1)])
    bucket = ActionPolicy.objects.create(action="likes", period=3600, max_count=100_000, algorithm="token_bucket")
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.filter(pk=bucket.pk).update(algorithm="sliding_log")
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.filter(action="reply").update(max_count=MAX_LOG_ENTRIES + 1)
    ActionPolicy.objects.filter(action="reply").update(max_count=MAX_LOG_ENTRIES)


def test_an_extra_window_above_the_logs_cap_is_refused_unless_the_policy_is_a_bucket():
    log = ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    window = ActionWindow(policy=log, period=3600, max_count=MAX_LOG_ENTRIES + 1)
    assert f"at most {MAX_LOG_ENTRIES:,}" in " ".join(errors_of(window)["max_count"])
    with pytest.raises(ValidationError):
        window.save()
    assert not log.windows.exists()
    bucket = ActionPolicy.objects.create(action="likes", period=60, max_count=5, algorithm="token_bucket")
    ActionWindow(policy=bucket, period=3600, max_count=100_000).full_clean()
    ActionWindow.objects.create(policy=bucket, period=3600, max_count=100_000)
    # Switching that bucket to a log is refused while the window is above the cap.
    bucket.algorithm = "sliding_log"
    assert f"at most {MAX_LOG_ENTRIES:,}" in " ".join(errors_of(bucket)["algorithm"])


@pytest.mark.parametrize("action", ["Reply", "a b", "a:b", "reply!", "réponse", "{reply}", "reply\n"])
def test_full_clean_refuses_bad_action_names(action):
    errors = errors_of(ActionPolicy(action=action, period=60, max_count=5))
    assert ACTION_TEXT in " ".join(errors["action"])


def test_full_clean_refuses_an_empty_action_name():
    errors = errors_of(ActionPolicy(action="", period=60, max_count=5))
    assert errors["action"] == ["This field cannot be blank."]


def test_full_clean_refuses_a_duplicate_action():
    ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    errors = errors_of(ActionPolicy(action="reply2", period=30, max_count=2))
    assert "already exists" in " ".join(errors["action"])


def assert_refused_by_the_database(**fields):
    row = {"action": "reply2", "period": 60, "max_count": 5, **fields}
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.create(**row)
    assert not ActionPolicy.objects.filter(action=row["action"]).exists()


@pytest.mark.parametrize("period", [0, MAX_PERIOD + 1])
def test_the_database_refuses_a_period_out_of_range(period):
    assert_refused_by_the_database(period=period)


@pytest.mark.parametrize("max_count", [0, MAX_LOG_ENTRIES + 1])
def test_the_database_refuses_a_max_count_out_of_range(max_count):
    assert_refused_by_the_database(max_count=max_count)


@pytest.mark.parametrize("action", ["Reply", "a b", "a:b", "", "reply\n"])
def test_the_database_refuses_bad_action_names(action):
    assert_refused_by_the_database(action=action)


def test_the_database_refuses_an_update_that_skips_save():
    ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    for change in ({"period": 0}, {"max_count": MAX_LOG_ENTRIES + 1}, {"action": "Reply 2"}):
        with pytest.raises(IntegrityError), transaction.atomic():
            ActionPolicy.objects.filter(action="reply2").update(**change)
    assert ActionPolicy.objects.filter(action="reply2", period=60, max_count=5).exists()


def test_a_window_with_the_main_period_is_refused():
    policy = ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    errors = errors_of(ActionWindow(policy=policy, period=60, max_count=10))
    assert "main limit already uses this period" in " ".join(errors["period"])
    ActionWindow(policy=policy, period=3600, max_count=50).full_clean()


@pytest.mark.parametrize(
    "fields", [{"period": 0}, {"period": MAX_PERIOD + 1}, {"max_count": 0}, {"max_count": MAX_BUCKET_SIZE + 1}]
)
def test_a_window_out_of_range_is_refused_by_form_and_database(fields):
    policy = ActionPolicy.objects.create(action="reply2", period=60, max_count=5, algorithm="token_bucket")
    window = ActionWindow(policy=policy, **{"period": 3600, "max_count": 50, **fields})
    (field,) = fields
    assert errors_of(window)[field]
    with pytest.raises(IntegrityError), transaction.atomic():
        window.save()


def test_a_duplicate_window_period_is_refused():
    policy = ActionPolicy.objects.create(action="reply2", period=60, max_count=5)
    ActionWindow.objects.create(policy=policy, period=3600, max_count=50)
    errors = errors_of(ActionWindow(policy=policy, period=3600, max_count=40))
    assert "already" in " ".join(errors[next(iter(errors))])
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionWindow.objects.create(policy=policy, period=3600, max_count=40)
    assert policy.windows.count() == 1
    # The same period on another policy is fine.
    other = ActionPolicy.objects.create(action="like2", period=60, max_count=5)
    ActionWindow.objects.create(policy=other, period=3600, max_count=40)


@pytest.mark.parametrize("action", ["reply", "post", "like"])
def test_the_data_migration_creates_editable_defaults(action):
    policy = ActionPolicy.objects.get(action=action)
    policy.full_clean()
    assert policy.enabled and policy.verb and policy.description
    windows = list(policy.windows.all())
    assert windows, f"{action} has no extra window"
    for window in windows:
        window.full_clean()
        # A longer window must be the stricter rate, or it would never bind.
        assert window.period > policy.period
        assert policy.max_count < window.max_count < policy.max_count * window.period / policy.period


def test_windows_display_lists_every_limit():
    policy = ActionPolicy.objects.create(action="reply2", period=5, max_count=1)
    ActionWindow.objects.create(policy=policy, period=3600, max_count=20)
    ActionWindow.objects.create(policy=policy, period=2 * 86400, max_count=100)
    shown = policy.windows_display()
    # Shortest window first, each in the unit a moderator would use.
    assert shown.startswith("1 per 5 ") and shown.endswith(", 20 per hour, 100 per 2 days")
    assert str(policy) == "reply2"


def test_creating_a_policy_in_code_replaces_an_unedited_default(redis_server):
    import throttling

    assert ActionPolicy.objects.get(action="reply").stock_default
    policy = ActionPolicy.objects.create(action="reply", period=60, max_count=5)
    assert ActionPolicy.objects.filter(action="reply").count() == 1
    assert not policy.stock_default and policy.windows.count() == 0  # the default's windows went with it
    decisions = [throttling.check("zed", "reply") for _ in range(6)]
    assert [d.allowed for d in decisions] == [True] * 5 + [False]
    assert decisions[0].limit == 5


def test_an_edited_default_is_never_replaced():
    default = ActionPolicy.objects.get(action="post")
    default.max_count = 4
    default.save()
    assert not ActionPolicy.objects.get(action="post").stock_default
    with pytest.raises(IntegrityError), transaction.atomic():
        ActionPolicy.objects.create(action="post", period=60, max_count=5)
    assert ActionPolicy.objects.get(action="post").max_count == 4
