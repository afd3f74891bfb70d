"""Modules that moved when the package was laid out by feature: their old paths still import, with a warning.

A project written against an earlier release (`from throttling.text import local_time`, `from
throttling.targets import normalised`) runs unchanged; the four documented entry points
(throttling.middleware, .throttles, .decorators, .notices) are modules of their own and never warn.
See Architecture › Moved modules.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

# Old dotted path -> where the module lives now.
MOVED = {
    "throttling.bindings": "throttling.adapters.url_bindings",
    "throttling.content_source": "throttling.adapters.post_text",
    "throttling.counting": "throttling.adapters.counting_rules",
    "throttling.created": "throttling.adapters.created_rows",
    "throttling.logins": "throttling.adapters.login_redirects",
    "throttling.targets": "throttling.adapters.targets",
    "throttling.headers": "throttling.adapters.ratelimit_headers",
    "throttling.refusals": "throttling.adapters.refusal.page",
    "throttling.resend": "throttling.adapters.refusal.resend_fields",
    "throttling.choices": "throttling.common.choices",
    "throttling.durations": "throttling.common.durations",
    "throttling.text": "throttling.common.words",
    "throttling.sentences": "throttling.common.alert_words",
    "throttling.observe": "throttling.common.observe",
    "throttling.engine.local": "throttling.engine.refusal_memory",
    "throttling.engine.decide": "throttling.engine.deciding.plan",
    "throttling.engine.mirror": "throttling.engine.deciding.penalty_codec",
    "throttling.engine.declared": "throttling.engine.policies.declared",
    "throttling.engine.trust": "throttling.engine.policies.trust",
    "throttling.engine.duplicates": "throttling.engine.content.decisions",
    "throttling.engine.measures": "throttling.engine.countermeasures.in_force",
    "throttling.engine.blocks": "throttling.engine.countermeasures.block_lookup",
    "throttling.engine.ranges": "throttling.engine.countermeasures.address_ranges",
    "throttling.engine.surges": "throttling.engine.countermeasures.surge_state",
    "throttling.engine.poller": "throttling.engine.background.poller",
    "throttling.engine.watch": "throttling.engine.background.eviction_watch",
    "throttling.engine.doubt": "throttling.engine.background.undo_timeouts",
    "throttling.engine.sender": "throttling.engine.background.task_sender",
    "throttling.engine.escalations": "throttling.engine.offences.escalations",
    "throttling.engine.history": "throttling.engine.offences.report_batches",
    "throttling.raids.blocks": "throttling.raids.first_refusals",
    "throttling.raids.imports": "throttling.raids.bulk_import",
    "throttling.raids.surges": "throttling.raids.surge_mode",
    "throttling.backends.urls": "throttling.backends.redis_urls",
    "throttling.penalties.mirror": "throttling.penalties.redis_mirror",
    "throttling.checks.history": "throttling.checks.replay_sources",
    "throttling.admin.policy": "throttling.admin.policies.policy",
    "throttling.admin.guide": "throttling.admin.policies.guide",
    "throttling.admin.override": "throttling.admin.policies.override",
    "throttling.admin.penalty": "throttling.admin.penalties.penalty",
    "throttling.admin.ladder": "throttling.admin.penalties.ladder",
    "throttling.admin.lifting": "throttling.admin.penalties.lifting",
    "throttling.admin.member": "throttling.admin.penalties.member",
    "throttling.admin.labels": "throttling.admin.penalties.labels",
    "throttling.admin.blocks": "throttling.admin.raids.blocks",
    "throttling.admin.surges": "throttling.admin.raids.surges",
    "throttling.admin.alerts": "throttling.admin.raids.alerts",
    "throttling.admin.raid_forms": "throttling.admin.raids.forms",
    "throttling.admin.whatif_figures": "throttling.admin.whatif.figures",
}


# Modules whose path is now a package of their part: the package forwards the module's names.
REPLACED = {
    "throttling.admin.whatif": "throttling.admin.whatif.views",
    "throttling.engine.content": "throttling.engine.content.fingerprints",
    "throttling.engine.offences": "throttling.engine.offences.record",
    "throttling.engine.policies": "throttling.engine.policies.cache",
}


def forward(package):
    """The module-level __getattr__ of a package in REPLACED: the names of the module it replaced, with a
    warning (a submodule of the package is imported as ever: its name is never asked of this)."""
    module_name = REPLACED[package]

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            value = getattr(importlib.import_module(module_name), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        warnings.warn(
            f"{package}.{name} moved to {module_name}.{name}; import it from there (the old path goes in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return __getattr__


class _MovedLoader(importlib.abc.Loader):
    def __init__(self, new):
        self.new = new

    def exec_module(self, module):
        old = module.__name__
        warnings.warn(
            f"{old} moved to {self.new}; import it from there (the old path goes in a later release)",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system returns what sys.modules holds once exec_module returns: the module
        # itself, so both names share one module object (and one set of its state).
        sys.modules[old] = importlib.import_module(self.new)


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds an old path of MOVED and hands out the module at its new one."""

    def find_spec(self, fullname, path=None, target=None):
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _MovedLoader(new))


def install():
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
