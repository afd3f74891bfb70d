"""Editable starting policies for reply, post and like (docs/policies.md explains the numbers)."""

from django.db import migrations

DEFAULTS = [
    # action, period, max_count, verb, extra windows, description
    ("reply", 60, 6, "replied", [(3600, 60)],
     "A reply every ten seconds on average is faster than anyone reads a thread; "
     "an hour of sustained replying is capped at 60."),
    ("post", 600, 3, "posted", [(86400, 20)],
     "New threads take thought: three per ten minutes, twenty per day."),
    ("like", 60, 30, "liked", [(3600, 300)],
     "Likes are cheap and come in bursts while scrolling; 30 a minute stops scripts, not people."),
]


def create(apps, schema_editor):
    ActionPolicy = apps.get_model("throttling", "ActionPolicy")
    ActionWindow = apps.get_model("throttling", "ActionWindow")
    for action, period, max_count, verb, windows, description in DEFAULTS:
        policy, created = ActionPolicy.objects.get_or_create(
            action=action,
            defaults={
                "period": period,
                "max_count": max_count,
                "verb": verb,
                "description": description,
                "stock_default": True,
            },
        )
        if created:
            for extra_period, extra_max in windows:
                ActionWindow.objects.create(policy=policy, period=extra_period, max_count=extra_max)


def remove(apps, schema_editor):
    ActionPolicy = apps.get_model("throttling", "ActionPolicy")
    ActionPolicy.objects.filter(action__in=[d[0] for d in DEFAULTS]).delete()


class Migration(migrations.Migration):
    dependencies = [("throttling", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
