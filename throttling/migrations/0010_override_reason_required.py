from django.conf import settings
from django.db import migrations, models

# Overrides saved before the database required a reason keep their row and say so.
NO_REASON = "No reason was recorded when this override was granted."


def give_blank_reasons_a_note(apps, schema_editor):
    MemberOverride = apps.get_model("throttling", "MemberOverride")
    # The constraint's own test, so every row it would refuse gets the note.
    overrides = MemberOverride.objects.using(schema_editor.connection.alias)
    overrides.exclude(reason__regex=r"\S").update(reason=NO_REASON)


class Migration(migrations.Migration):
    dependencies = [
        ("throttling", "0009_penalty_reason_code"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RunPython(give_blank_reasons_a_note, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="memberoverride",
            constraint=models.CheckConstraint(
                condition=models.Q(("reason__regex", "\\S")),
                name="throttling_override_reason",
                violation_error_message="Say why, for the record.",
            ),
        ),
    ]
