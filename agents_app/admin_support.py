"""Django admin writes through the same parser, validation and service as REST and the dashboard.

A form's values are read back through `config_io.document_to_snapshot` (so a JSON field of the
wrong shape is a form error, never a server error), the whole configuration as it would be after
the save is validated (SPEC §2.5), and the save itself goes through `config_update`, so every
change gets a revision. Deleting shows the plan (references scrubbed) and is refused, with the
§2.5 messages, when it would leave the configuration invalid."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.forms.models import construct_instance
from django.http import HttpRequest

from agents_app.config_io import ConfigParseError, ConfigShapeError, document_to_snapshot
from agents_app.representation import entry_to_document_body, spec_types
from agents_app.secrets import MASK, StoredSecret, secret_document_value
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError, config_update
from agents_app.snapshot import ConfigSnapshot, SecretValue
from agents_app.validation import delete_agent_plan, validate_new_agent_alias, validate_snapshot
from agents_app.web import without_null_character_check

# Entries that are one table of their own rather than one of many keyed ones.
SINGLETONS: tuple[str, ...] = ("delegate", "mcp")

# (snapshot, old key or None, new key, spec or None for delete) -> snapshot
Mutator = Callable[[ConfigSnapshot, str | None, str | None, Any], ConfigSnapshot]
Error = tuple[str, str]

_FIELD_NAME = re.compile(r"[A-Za-z_]+")


def replace_entry(section: str) -> Mutator:
    def mutate(snap: ConfigSnapshot, old_key: str | None, new_key: str | None, spec: Any) -> ConfigSnapshot:
        entries = dict(getattr(snap, section))
        if old_key is not None:
            entries.pop(old_key, None)
        if new_key is not None:
            entries[new_key] = spec
        return dataclasses.replace(snap, **{section: dict(sorted(entries.items()))})  # type: ignore[arg-type]

    return mutate


def _instance_entry(section: str, obj: Any) -> dict[str, Any]:
    """The JSON entry (as REST shows it) of a model instance, values taken as they are."""
    data: dict[str, Any] = {}
    for spec_field in dataclasses.fields(spec_types()[section]):
        name = spec_field.name
        value = getattr(obj, name)
        if name in ("input_per_mtok_cents", "output_per_mtok_cents"):
            data.setdefault("pricing", {})[name] = value
        elif name == "delegation_mode":
            data["delegation_policy"] = {"mode": value}
        elif name == "api_key":  # the stored token (the form does not edit it)
            if value:
                data[name] = StoredSecret(value)
        elif section == "mcp_servers" and name in ("env", "headers"):
            # A stored row ({"token"}/{"env"}/{}) is kept as it is; a string is a new value.
            data[name] = {k: SecretValue(**v) if isinstance(v, dict) else v for k, v in (value or {}).items()}
        else:
            data[name] = value
    return data


def _entry_prefix(section: str, obj: Any) -> str:
    if section in SINGLETONS:
        return f"{section}."
    if section == "mcp_servers":
        return f"mcp.servers.{obj.name}."
    if section == "providers":
        return f"providers.models.{obj.type}.{obj.alias}."
    return f"{section}.{obj.alias}."


def spec_from_instance(section: str, obj: Any) -> tuple[Any, list[Error]]:
    """(spec, []) for a well-formed instance, else (None, shape errors)."""
    body = entry_to_document_body(_instance_entry(section, obj), section)
    doc: dict[str, Any]
    if section in SINGLETONS:
        doc = {section: body}
    elif section == "mcp_servers":
        doc = {"mcp": {"servers": [{"name": obj.name, **body}]}}
    elif section == "providers":
        doc = {"providers": {"models": {obj.type: {obj.alias: body}}}}
    else:
        doc = {section: {obj.alias: body}}
    try:
        snap = document_to_snapshot(doc).snapshot
    except ConfigShapeError as exc:
        return None, list(exc.errors)
    except ConfigParseError as exc:
        return None, [("", str(exc))]
    if section in SINGLETONS:
        return getattr(snap, section), []
    return next(iter(getattr(snap, section).values())), []


class ConfigModelForm(forms.ModelForm):
    """Validates the whole configuration as it would be after this save (SPEC §2.5)."""

    section: str
    mutator: Mutator
    key_of: Callable[[Any], str]
    config_spec: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        without_null_character_check(self)

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if self.errors:
            return cleaned
        cls = type(self)
        candidate = construct_instance(self, copy.copy(self.instance))
        prefix = _entry_prefix(cls.section, candidate)
        spec, shape_errors = spec_from_instance(cls.section, candidate)
        if shape_errors:
            self._report(shape_errors, prefix)
            return cleaned
        old_key = cls.key_of(self.instance) if self.instance.pk else None
        new_key = cls.key_of(candidate)
        if cls.section == "agents" and new_key != old_key:
            reserved = validate_new_agent_alias(new_key)
            if reserved:
                self.add_error("alias", reserved)
                return cleaned
        snap = config_snapshot_get()
        if cls.section not in SINGLETONS and new_key != old_key and new_key in getattr(snap, cls.section):
            return cleaned  # the model's own unique check reports it
        errors = validate_snapshot(cls.mutator(snap, old_key, new_key, spec))
        if errors:
            self._report(errors, prefix)
            return cleaned
        self.config_spec = spec
        return cleaned

    def _report(self, errors: list[Error], prefix: str) -> None:
        """Each message under the field it is about, the rest (other entries) above the form."""
        for path, message in errors:
            found = _FIELD_NAME.match(path[len(prefix) :]) if path.startswith(prefix) else None
            field = found.group(0) if found else None
            self.add_error(field if field in self.fields else None, message)


class ConfigAdmin(admin.ModelAdmin):
    """Saves and deletes through `config_update`, so every change gets a revision."""

    section: str
    mutator: Mutator
    key_of: Callable[[Any], str]

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, form=ConfigModelForm, **kwargs)
        form.section = type(self).section  # type: ignore[attr-defined]
        form.mutator = staticmethod(type(self).mutator)  # type: ignore[attr-defined]
        form.key_of = staticmethod(type(self).key_of)  # type: ignore[attr-defined]
        return form

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        old_key = None
        if change:
            old_key = type(self).key_of(type(obj).objects.get(pk=obj.pk))
        new_key = type(self).key_of(obj)
        spec = getattr(form, "config_spec", None)
        if spec is None:
            spec = obj.to_spec()
        try:
            config_update(
                mutate=lambda s: type(self).mutator(s, old_key, new_key, spec),
                user=request.user,
                summary=f"admin: {'change' if change else 'add'} {new_key}",
            )
        except ConfigValidationError as exc:  # a concurrent change made it invalid
            messages.error(request, str(exc))
            return
        fresh = type(obj).objects.filter(**self._lookup(obj)).first()
        if fresh is not None:
            obj.pk = fresh.pk

    def _lookup(self, obj: Any) -> dict[str, Any]:
        if type(self).section == "mcp_servers":
            return {"name": obj.name}
        if not hasattr(obj, "alias"):  # the [delegate] and [mcp] singletons
            return {"pk": 1}
        return {"alias": obj.alias} if not hasattr(obj, "type") else {"type": obj.type, "alias": obj.alias}

    def _without(self, snap: ConfigSnapshot, objs: Iterable[Any]) -> tuple[ConfigSnapshot, list[str]]:
        """The configuration after deleting `objs`, and the plan of what else that changes."""
        plan: list[str] = []
        for obj in objs:
            key = type(self).key_of(obj)
            if type(self).section == "agents":
                if key not in snap.agents:
                    continue
                plan.extend(delete_agent_plan(snap, key))
            snap = type(self).mutator(snap, key, None, None)
        return snap, plan

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        deleted, model_count, perms_needed, protected = super().get_deleted_objects(objs, request)
        new, plan = self._without(config_snapshot_get(), list(objs))
        # A non-empty `protected` makes the admin refuse the deletion and list these messages.
        refusals = [message for _, message in validate_snapshot(new)]
        return [*deleted, *plan], model_count, perms_needed, [*protected, *refusals]

    def _delete(self, request: HttpRequest, objs: list[Any]) -> None:
        keys = ", ".join(type(self).key_of(obj) for obj in objs)
        try:
            config_update(
                mutate=lambda s: self._without(s, objs)[0],
                user=request.user,
                summary=f"admin: delete {keys}",
            )
        except ConfigValidationError as exc:
            messages.error(request, str(exc))

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._delete(request, [obj])

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        self._delete(request, list(queryset))


class SecretMapField(forms.JSONField):
    """An MCP server's `env` or `headers` in the admin: a JSON object whose stored values show
    as the mask (or `${VAR}` for a reference); sending the mask back keeps the stored value."""

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, dict):
            shown = {
                k: secret_document_value(SecretValue(**v), "mask") if isinstance(v, dict) else v
                for k, v in value.items()
            }
            return super().prepare_value(shown)
        return super().prepare_value(value)


def keep_masked_rows(value: Any, stored: dict[str, Any]) -> Any:
    """The form's map with each masked value replaced by the stored row it stands for."""
    if not isinstance(value, dict):
        return value
    return {k: stored[k] if v == MASK and k in stored else v for k, v in value.items()}
