"""Provider API keys kept in Clawboard: encrypted at rest (Fernet), never shown.

A snapshot holds a provider's `api_key` as its Fernet token. A document (TOML, REST, the
dashboard form) carries the key itself, the mask `********` (= keep the stored key), or
nothing; `resolve_secrets` turns those into tokens against the current configuration before
anything is validated or saved. Exports and REST answers show the mask. The key is decrypted
only where a provider is built (`provider_api_key`).

The encryption keys come from `CLAWBOARD_ENCRYPTION_KEY` (comma-separated Fernet keys, the
first encrypts, all decrypt, so a key can be rotated without downtime). Without it, the
embedded mode generates one into `DATA_DIR/encryption-key.txt` (mode 600), like the admin
credentials; a scale-out deployment must set it, since its processes share the database but
not a disk."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from agents_app.snapshot import ConfigSnapshot, ProviderSpec

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
    if providers is None:
        return new, errors
    return dataclasses.replace(new, providers=providers), errors


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
