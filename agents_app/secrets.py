"""Provider API keys and MCP servers' `env`/`headers` values kept in Clawboard: encrypted at
rest (Fernet), never shown.

A snapshot holds a provider's `api_key` as its Fernet token. A document (TOML, REST, the
dashboard form) carries the key itself, the mask `********` (= keep the stored key), or
nothing; `resolve_secrets` turns those into tokens against the current configuration before
anything is validated or saved. Exports and REST answers show the mask. The key is decrypted
only where a provider is built (`provider_api_key`).

An MCP server's `env` and `headers` values work the same way, one `SecretValue` per name: a
document carries the value itself, the mask (keep the stored value), or `${VAR}`, which is kept
as a reference to Clawboard's environment variable VAR (read when the server starts, never
stored). A ZeroClaw `enc2:` value cannot be read; it is kept as a value to enter again
(`SecretValue.missing`). `mcp_secret_plain` is the one place such a value is read.

The encryption keys come from `CLAWBOARD_ENCRYPTION_KEY` (comma-separated Fernet keys, the
first encrypts, all decrypt, so a key can be rotated without downtime). Without it, the
embedded mode generates one into `DATA_DIR/encryption-key.txt` (mode 600), like the admin
credentials; a scale-out deployment must set it, since its processes share the database but
not a disk."""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from agents_app.snapshot import ConfigSnapshot, McpServerSpec, ProviderSpec, SecretValue

Error = tuple[str, str]
log = logging.getLogger(__name__)

MASK = "********"
KEY_FILE_NAME = "encryption-key.txt"
MAX_KEY_CHARS = 4096
# ZeroClaw's own secret store writes `enc2:` (and formerly `enc:`) values; its key is not ours.
ZEROCLAW_ENCRYPTED_PREFIXES: tuple[str, ...] = ("enc2:", "enc:")


class SecretInput(str):
    """An `api_key` as a document gave it: the key itself, the mask, or ""."""


class StoredSecret(str):
    """A Fernet token carried through a document rebuilt from a snapshot (never user input)."""


class SecretsUnavailable(Exception):
    pass


# `${VAR}`, the whole value: a reference to an environment variable of Clawboard's process.
ENV_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")


def secret_from_document(text: str) -> SecretValue:
    """One `env`/`headers` value as a document gives it (not yet resolved: see resolve_secrets)."""
    found = ENV_REFERENCE.match(text)
    if found:
        return SecretValue(env=found.group(1))
    return SecretValue(token=SecretInput(text))


def secret_document_value(value: SecretValue, secrets: str) -> SecretValue | str:
    """What a document shows of a stored value: `${VAR}` for a reference, else the mask (or,
    for a document read back in this process, the value itself with `secrets="keep"`)."""
    if secrets == "keep":
        return value
    return f"${{{value.env}}}" if value.env else MASK


_lock = threading.Lock()
_cache: dict[str, MultiFernet] = {}


def _embedded() -> bool:
    return str(getattr(settings, "CELERY_BROKER_URL", "")).startswith("memory://")


def key_file() -> Path:
    return Path(settings.DATA_DIR) / KEY_FILE_NAME


def _configured_keys() -> list[str]:
    raw = str(getattr(settings, "CLAWBOARD_ENCRYPTION_KEY", "") or "")
    keys = [k.strip() for k in raw.replace("\n", ",").split(",") if k.strip()]
    if keys:
        return keys
    if not _embedded():
        raise SecretsUnavailable(
            "CLAWBOARD_ENCRYPTION_KEY is not set; a scale-out deployment needs it to keep provider keys"
        )
    path = key_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(Fernet.generate_key().decode() + "\n")
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


def fernet() -> MultiFernet:
    keys = _configured_keys()
    cache_key = ",".join(keys)
    with _lock:
        found = _cache.get(cache_key)
        if found is None:
            try:
                found = MultiFernet([Fernet(k.encode()) for k in keys])
            except ValueError as exc:
                raise SecretsUnavailable(f"the encryption key is not a valid Fernet key ({exc})") from exc
            _cache.clear()
            _cache[cache_key] = found
    return found


def encrypt(plain: str) -> str:
    return fernet().encrypt(plain.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return fernet().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as exc:
        raise SecretsUnavailable(
            "a stored provider key cannot be decrypted with the configured keys"
        ) from exc


def _same_key(token: str, plain: str) -> bool:
    try:
        return decrypt(token) == plain
    except SecretsUnavailable:
        return False


def resolve_secrets(new: ConfigSnapshot, old: ConfigSnapshot) -> tuple[ConfigSnapshot, list[Error]]:
    """`new` with every api_key a document gave replaced by its token (see module doc)."""
    from agents_app.validation import control_character_error

    errors: list[Error] = []
    providers: dict[str, ProviderSpec] | None = None
    for ref, spec in new.providers.items():
        value = spec.api_key
        if not isinstance(value, SecretInput):
            continue
        path = f"providers.models.{spec.type}.{spec.alias}.api_key"
        previous = old.providers.get(ref)
        stored = previous.api_key if previous is not None else ""
        token: str | None = None
        if value == MASK:
            if stored:
                token = stored
            else:
                errors.append(
                    (
                        path,
                        f'{path} = "{MASK}" stands for the stored key, but no key is stored for this '
                        "provider; give the key itself, or leave api_key out",
                    )
                )
        elif value == "":
            token = ""
        elif len(value) > MAX_KEY_CHARS:
            errors.append((path, f"{path} is longer than {MAX_KEY_CHARS} characters"))
        elif (err := control_character_error(path, value)) is not None:
            errors.append(err)
        elif stored and _same_key(stored, value):
            token = stored  # the same key again: no new token, so no change and no revision
        else:
            try:
                token = encrypt(str(value))
            except SecretsUnavailable as exc:
                errors.append((path, f"{path} cannot be stored: {exc}"))
        if token is not None:
            if providers is None:
                providers = dict(new.providers)
            providers[ref] = dataclasses.replace(spec, api_key=token)
    servers, mcp_errors = _resolve_mcp_secrets(new, old)
    errors += mcp_errors
    changes: dict[str, object] = {}
    if providers is not None:
        changes["providers"] = providers
    if servers is not None:
        changes["mcp_servers"] = servers
    if not changes:
        return new, errors
    return dataclasses.replace(new, **changes), errors  # type: ignore[arg-type]


def _resolve_one(
    path: str, value: str, stored: SecretValue | None
) -> tuple[SecretValue | None, Error | None]:
    from agents_app.validation import control_character_error

    if value == MASK:
        if stored is not None:
            return stored, None
        return None, (
            path,
            f'{path} = "{MASK}" stands for the stored value, but none is stored for it; give the '
            'value itself, or "${VAR}" to read it from an environment variable',
        )
    if len(value) > MAX_KEY_CHARS:
        return None, (path, f"{path} is longer than {MAX_KEY_CHARS} characters")
    if (err := control_character_error(path, value)) is not None:
        return None, err
    if stored is not None and stored.token and _same_key(stored.token, value):
        return stored, None  # the same value again: no new token, so no change and no revision
    try:
        return SecretValue(token=encrypt(value)), None
    except SecretsUnavailable as exc:
        return None, (path, f"{path} cannot be stored: {exc}")


def _resolve_mcp_secrets(
    new: ConfigSnapshot, old: ConfigSnapshot
) -> tuple[dict[str, McpServerSpec] | None, list[Error]]:
    errors: list[Error] = []
    servers: dict[str, McpServerSpec] | None = None
    for name, spec in new.mcp_servers.items():
        previous = old.mcp_servers.get(name)
        changes: dict[str, dict[str, SecretValue]] = {}
        for field_name in ("env", "headers"):
            values: dict[str, SecretValue] = getattr(spec, field_name)
            if not any(isinstance(v.token, SecretInput) for v in values.values()):
                continue
            stored_values: dict[str, SecretValue] = getattr(previous, field_name) if previous else {}
            resolved: dict[str, SecretValue] = {}
            for key, value in values.items():
                if not isinstance(value.token, SecretInput):
                    resolved[key] = value
                    continue
                path = f"mcp.servers.{name}.{field_name}.{key}"
                got, err = _resolve_one(path, str(value.token), stored_values.get(key))
                if err is not None:
                    errors.append(err)
                elif got is not None:
                    resolved[key] = got
            changes[field_name] = resolved
        if changes:
            if servers is None:
                servers = dict(new.mcp_servers)
            servers[name] = dataclasses.replace(spec, **changes)  # type: ignore[arg-type]
    return servers, errors


def mcp_secret_plain(value: SecretValue) -> str | None:
    """The plain value an MCP server is given: the environment variable's value (None when it
    is not set), the decrypted stored value, or None for a value still to enter again."""
    if value.env:
        return os.environ.get(value.env)
    if value.token and not isinstance(value.token, SecretInput):
        return decrypt(value.token)
    return None


def provider_api_key(spec: ProviderSpec) -> str:
    """The key a provider sends: `api_key_env`'s variable when it has a value (it wins), else
    the stored key, else "". Only providers call this."""
    if spec.api_key_env:
        from_env = os.environ.get(spec.api_key_env, "")
        if from_env:
            return from_env
    if spec.api_key and not isinstance(spec.api_key, SecretInput):
        try:
            return decrypt(spec.api_key)
        except SecretsUnavailable as exc:
            # The call then fails to authenticate; the reason goes to the log, never the key.
            log.warning("provider %s: %s", spec.ref, exc)
    return ""


def rotate_token(token: str) -> str:
    """The token re-encrypted with the first (current) key."""
    try:
        return fernet().rotate(token.encode("ascii")).decode("ascii")
    except InvalidToken as exc:
        raise SecretsUnavailable(
            "a stored provider key cannot be decrypted with the configured keys"
        ) from exc
