"""User accounts and API tokens, as the ``mlte web user`` commands manage them.

Plain functions over a SQLAlchemy session (no Flask request needed), raising :class:`UserAdminError`
with a one-line message, so the CLI prints it without a traceback. Tokens are shown once, when
made, and only their SHA-256 is stored (:mod:`app.web.auth`); passwords are werkzeug scrypt hashes.
"""
from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session
from werkzeug.security import generate_password_hash

from app.db.models import ApiToken, AuditEntry, Reservation, User
from app.errors import MlteError
from app.web.auth import add_token

MAX_LABEL = 64
MAX_PASSWORD = 1024  # scrypt hashes anything, but a megabyte "password" is a mistake, not a secret


class UserAdminError(MlteError):
    """A user command that cannot be done (no such user, last admin, duplicate label...)."""


@dataclass(frozen=True)
class TokenRow:
    """One token of a :class:`UserRow`: its label (what ``revoke-token`` asks for) and its use."""

    label: str
    created: float
    last_used: float | None
    expires: float | None


@dataclass(frozen=True)
class UserRow:
    """One line of ``mlte web user list``."""

    name: str
    admin: bool
    has_password: bool
    tokens: int
    created: float
    disabled: bool = False
    token_rows: tuple[TokenRow, ...] = ()


def get_user(db: Session, name: str) -> User:
    user = db.execute(select(User).where(User.name == name)).scalar()
    if user is None:
        known = sorted(db.execute(select(User.name)).scalars())
        hint = f" (users: {', '.join(known)})" if known else " (there are no users yet: mlte web user create NAME)"
        raise UserAdminError(f"no user {name!r}{hint}")
    return user


def check_password_text(password: str) -> str:
    """Refuse passwords nobody can type into the login form (empty, NUL, absurdly long)."""
    if not password:
        raise UserAdminError("the password is empty")
    if "\x00" in password:
        raise UserAdminError("the password contains a NUL character")
    if len(password) > MAX_PASSWORD:
        raise UserAdminError(f"the password is longer than {MAX_PASSWORD} characters")
    return password


def set_password(db: Session, name: str, password: str) -> User:
    """A new password ends the user's logged-in sessions (someone may have had the old one)."""
    user = get_user(db, name)
    user.password_hash = generate_password_hash(check_password_text(password))
    user.session_epoch += 1
    return user


def _enabled_admins(db: Session) -> int:
    return db.execute(select(func.count()).select_from(User)
                      .where(User.is_admin.is_(True), User.disabled.is_(False))).scalar_one()


def set_disabled(db: Session, name: str, disabled: bool) -> bool:
    """Disable (refuse login, sessions and tokens; keep reservations) or enable a user; return whether
    anything changed. Disabling ends the sessions for good: enabling again does not revive them."""
    user = get_user(db, name)
    if user.disabled == disabled:
        return False
    if disabled and user.is_admin and _enabled_admins(db) <= 1:
        raise UserAdminError(f"{name} is the last enabled admin: make another user admin first "
                             f"(mlte web user admin NAME --on)")
    user.disabled = disabled
    if disabled:
        user.session_epoch += 1
    return True


def set_admin(db: Session, name: str, admin: bool) -> bool:
    """Promote or demote; never the last enabled admin (nobody could manage the others' reservations).
    Return whether anything changed."""
    user = get_user(db, name)
    if bool(user.is_admin) == admin:
        return False
    if not admin and not user.disabled and _enabled_admins(db) <= 1:
        raise UserAdminError(f"{name} is the last admin: make another user admin first (mlte web user admin NAME --on)")
    user.is_admin = admin
    return True


def list_users(db: Session) -> list[UserRow]:
    tokens: dict[int, list[TokenRow]] = {}
    for t in db.execute(select(ApiToken).order_by(ApiToken.created_at, ApiToken.id)).scalars():
        tokens.setdefault(t.user_id, []).append(TokenRow(t.label, t.created_at, t.last_used_at, t.expires_at))
    return [UserRow(u.name, bool(u.is_admin), bool(u.password_hash), len(tokens.get(u.id, [])), u.created_at,
                    bool(u.disabled), tuple(tokens.get(u.id, [])))
            for u in db.execute(select(User).order_by(User.name)).scalars()]


def remove_user(db: Session, name: str, *, force: bool = False) -> None:
    """Delete a user and its tokens. The last admin only with ``force`` (nobody could manage the
    others' reservations any more); never a user reservations or audit entries still refer to."""
    user = get_user(db, name)
    if user.is_admin and not force:
        admins = db.execute(select(func.count()).select_from(User).where(User.is_admin.is_(True))).scalar_one()
        if admins <= 1:
            raise UserAdminError(f"{name} is the last admin: create another admin first, or add --force")
    owned = db.execute(select(func.count()).select_from(Reservation)
                       .where(Reservation.owner_id == user.id)).scalar_one()
    audited = db.execute(select(func.count()).select_from(AuditEntry)
                         .where(AuditEntry.user_id == user.id)).scalar_one()
    if owned or audited:
        raise UserAdminError(f"{name} owns {owned} reservation(s) and made {audited} audited change(s), kept for "
                             f"the history: revoke access instead (mlte web user revoke-token {name} --all)")
    db.delete(user)


def new_token(db: Session, name: str, label: str | None = None,
              expires_at: float | None = None) -> tuple[str, str]:
    """A new token for ``name`` and its label; labels are unique per user so ``revoke-token NAME LABEL``
    is unambiguous. ``expires_at`` (epoch seconds; ``None``: never) ends its validity."""
    user = get_user(db, name)
    labels = set(db.execute(select(ApiToken.label).where(ApiToken.user_id == user.id)).scalars())
    if label is None:
        n = len(labels) + 1
        while f"token{n}" in labels:
            n += 1
        label = f"token{n}"
    if not 1 <= len(label) <= MAX_LABEL:
        raise UserAdminError(f"the label must be 1..{MAX_LABEL} characters")
    if label in labels:
        raise UserAdminError(f"{name} already has a token labelled {label!r}: pick another --label or revoke it")
    return label, add_token(db, user, label, expires_at)


def revoke_tokens(db: Session, name: str, label: str | None) -> int:
    """Delete ``name``'s token labelled ``label`` (``None``: all of them); return how many went."""
    user = get_user(db, name)
    stmt = select(ApiToken).where(ApiToken.user_id == user.id)
    if label is not None:
        stmt = stmt.where(ApiToken.label == label)
    rows = list(db.execute(stmt).scalars())
    if label is not None and not rows:
        labels = sorted(db.execute(select(ApiToken.label).where(ApiToken.user_id == user.id)).scalars())
        have = f"its labels: {', '.join(labels)}" if labels else "it has no tokens"
        raise UserAdminError(f"{name} has no token labelled {label!r} ({have})")
    for row in rows:
        db.delete(row)
    return len(rows)
