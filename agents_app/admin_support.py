"""Django admin writes through the same service and validation as REST and the dashboard."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.forms.models import construct_instance
from django.http import HttpRequest

from agents_app.services import ConfigValidationError, config_update
from agents_app.snapshot import ConfigSnapshot
from agents_app.validation import validate_snapshot

# (snapshot, old key or None, new key, spec or None for delete) -> snapshot
Mutator = Callable[[ConfigSnapshot, str | None, str | None, Any], ConfigSnapshot]


def replace_entry(section: str) -> Mutator:
    def mutate(snap: ConfigSnapshot, old_key: str | None, new_key: str | None, spec: Any) -> ConfigSnapshot:
        entries = dict(getattr(snap, section))
        if old_key is not None:
            entries.pop(old_key, None)
        if new_key is not None:
            entries[new_key] = spec
        return dataclasses.replace(snap, **{section: dict(sorted(entries.items()))})  # type: ignore[arg-type]

    return mutate


class ConfigModelForm(forms.ModelForm):
    """Validates the whole configuration as it would be after this save (SPEC §2.5)."""

    mutator: Mutator
    key_of: Callable[[Any], str]

    def clean(self) -> dict[str, Any]:
        cleaned: dict[str, Any] = super().clean() or {}
        if self.errors:
            return cleaned
        candidate = construct_instance(self, copy.copy(self.instance))
        old_key = type(self).key_of(self.instance) if self.instance.pk else None
        from agents_app.selectors import config_snapshot_get

        snap = type(self).mutator(
            config_snapshot_get(), old_key, type(self).key_of(candidate), candidate.to_spec()
        )
        errors = validate_snapshot(snap)
        if errors:
            raise forms.ValidationError([m for _, m in errors])
        return cleaned


class ConfigAdmin(admin.ModelAdmin):
    """Saves and deletes through `config_update`, so every change gets a revision."""

    mutator: Mutator
    key_of: Callable[[Any], str]

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, form=ConfigModelForm, **kwargs)
        form.mutator = staticmethod(type(self).mutator)  # type: ignore[attr-defined]
        form.key_of = staticmethod(type(self).key_of)  # type: ignore[attr-defined]
        return form

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        old_key = None
        if change:
            old_key = type(self).key_of(type(obj).objects.get(pk=obj.pk))
        new_key = type(self).key_of(obj)
        try:
            config_update(
                mutate=lambda s: type(self).mutator(s, old_key, new_key, obj.to_spec()),
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
        if not hasattr(obj, "alias"):  # the [delegate] singleton
            return {"pk": 1}
        return {"alias": obj.alias} if not hasattr(obj, "type") else {"type": obj.type, "alias": obj.alias}

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        key = type(self).key_of(obj)
        try:
            config_update(
                mutate=lambda s: type(self).mutator(s, key, None, None),
                user=request.user,
                summary=f"admin: delete {key}",
            )
        except ConfigValidationError as exc:
            messages.error(request, str(exc))

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for obj in queryset:
            self.delete_model(request, obj)
