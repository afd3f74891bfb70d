from django.conf import settings
from django.db import migrations, models


def count_earlier_penalties_as_shown(apps, schema_editor):
    # Penalties from before notices existed are old news: members are not shown them all at once.
    Penalty = apps.get_model("throttling", "Penalty")
    Penalty.objects.using(schema_editor.connection.alias).update(noticed_at=models.F("starts_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("throttling", "0010_override_reason_required"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="penalty",
            name="noticed_at",
            field=models.DateTimeField(blank=True, editable=False, null=True, verbose_name="shown to the member"),
        ),
        migrations.RunPython(count_earlier_penalties_as_shown, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="penalty",
            index=models.Index(
                condition=models.Q(("noticed_at__isnull", True)), fields=["user"], name="throttling_penalty_unnoticed"
            ),
        ),
    ]
