"""System checks of history sources (THROTTLING_HISTORY, declared policies' "history"): readable, and indexed."""

from django.core.checks import Error, Warning, register
from django.db import DatabaseError, connections, router
from django.utils.translation import gettext as _

from ..conf import settings
from ..replayer.sources import EXAMPLE, configured, read

# A table with more rows than this is read slowly without an index on (member, time); it is also
# the most a replay answers inline in the admin.
LARGE_TABLE = 100_000


@register()
def check_history_sources(app_configs=None, **kwargs):
    """throttling.E013: a history source names a model or field that does not exist, or cannot be read."""
    if not isinstance(settings.HISTORY, dict):
        return [
            Error(
                _("THROTTLING_HISTORY is %(value)r; it must be a dict from action name to its history.")
                % {"value": settings.HISTORY},
                hint=_("For example %(example)s.") % {"example": EXAMPLE},
                id="throttling.E013",
            )
        ]
    errors = []
    for action, raw in configured().items():
        _source, found = read(action, raw)
        errors += [
            Error(
                problem,
                hint=_(
                    "Each action's history names a model (“app_label.Model”), its member field (a foreign key "
                    "to the user model) and its time field (a DateTimeField); optionally a target field and a "
                    "filter of lookups."
                ),
                obj=action,
                id="throttling.E013",
            )
            for problem in found
        ]
    return errors


@register()
def check_history_indexes(app_configs=None, **kwargs):
    """throttling.W008: a large history table has no index on (member, time), which a replay reads in order."""
    if not isinstance(settings.HISTORY, dict):
        return []
    warnings = []
    for action, raw in configured().items():
        source, found = read(action, raw)
        if found:
            continue
        try:
            missing = _index_missing(source)
        except DatabaseError:  # not migrated yet, or not reachable: nothing to look at
            continue
        if missing:
            warnings.append(_warning(action, source))
    return warnings


def _index_missing(source):
    model = source.model
    alias = router.db_for_read(model)
    columns = [model._meta.get_field(source.member).column, model._meta.get_field(source.time).column]
    connection = connections[alias]
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    if any(list(c.get("columns") or [])[:2] == columns for c in constraints.values()):
        return False
    rows = model._default_manager.using(alias).order_by().values_list("pk", flat=True)
    return bool(list(rows[LARGE_TABLE : LARGE_TABLE + 1]))


def _warning(action, source):
    model = source.model
    meta = model._meta
    name = f"{meta.model_name}_{source.member}_{source.time}"[:30].rstrip("_")
    columns = ", ".join((meta.get_field(source.member).column, meta.get_field(source.time).column))
    return Warning(
        _(
            "The history of “%(action)s”, %(model)s, has more than %(rows)s rows and no index on (%(member)s, "
            "%(time)s): every replay sorts the whole table."
        )
        % {
            "action": action,
            "model": meta.label,
            "rows": f"{LARGE_TABLE:,}",
            "member": source.member,
            "time": source.time,
        },
        hint=_(
            "Add models.Index(fields=[%(fields)s], name=%(name)r) to the indexes of %(model)s’s Meta and run "
            "makemigrations, or in SQL: CREATE INDEX %(name)s ON %(table)s (%(columns)s);"
        )
        % {
            "fields": f'"{source.member}", "{source.time}"',
            "name": name,
            "model": meta.label,
            "table": meta.db_table,
            "columns": columns,
        },
        obj=action,
        id="throttling.W008",
    )
