"""The starting penalty ladder; moderators edit it in the admin."""

from datetime import timedelta

from django.db import migrations

LADDER = [
    (1, "Warning", timedelta(0), False),
    (2, "15 minutes", timedelta(minutes=15), False),
    (3, "1 hour", timedelta(hours=1), False),
    (4, "1 day", timedelta(days=1), False),
    (5, "7 days", timedelta(days=7), True),
    (6, "30 days", timedelta(days=30), True),
]


def create_ladder(apps, schema_editor):
    PenaltyStep = apps.get_model("throttling", "PenaltyStep")
    if PenaltyStep.objects.using(schema_editor.connection.alias).exists():
        return  # a project's own ladder wins
    PenaltyStep.objects.using(schema_editor.connection.alias).bulk_create(
        PenaltyStep(level=level, name=name, duration=duration, all_actions=all_actions)
        for level, name, duration, all_actions in LADDER
    )


def remove_ladder(apps, schema_editor):
    PenaltyStep = apps.get_model("throttling", "PenaltyStep")
    PenaltyStep.objects.using(schema_editor.connection.alias).filter(
        level__in=[level for level, *_ in LADDER]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("throttling", "0003_penalties")]

    operations = [migrations.RunPython(create_ladder, remove_ladder)]
