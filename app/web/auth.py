"""Authentication: API tokens (``Authorization: Bearer``; only SHA-256 hashes stored) for the REST API,
session login for the UI; roles user/admin (admins see and manage every reservation).

Tokens are 256 random bits, so a fast hash is enough; a token is found by looking its hash up, so no
secret is ever compared character by character (a timing difference could only reveal a prefix of
a hash, which does not help to forge a token). Passwords use werkzeug's scrypt.
"""
from __future__ import annotations

import hashlib
import secrets
import time

from flask import g, request, session
from sqlalchemy import select
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from app.db.models import ApiToken, Reservation, User
from app.web.errors import ApiError, Forbidden, Unauthorized


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_user(db: Session, name: str, *, admin: bool = False, password: str | None = None,
                label: str = "cli") -> tuple[User, str]:
    """Create a user with one API token; return the user and the token (shown only now)."""
    if not name or len(name) > 64:
        raise ApiError("user name must be 1..64 characters", field="name")
    from app.web.validation import bad_character

    bad = bad_character(name)
    if bad:
        raise ApiError(f"user name must not contain {bad}", field="name")
    if db.execute(select(User).where(User.name == name)).scalar() is not None:
        raise ApiError(f"user {name!r} exists already", field="name", status=409)
    user = User(name=name, is_admin=admin, created_at=time.time(),
                password_hash=generate_password_hash(password) if password else None)
    db.add(user)
    db.flush()
    return user, add_token(db, user, label)


def add_token(db: Session, user: User, label: str = "") -> str:
    token = "mlte_" + secrets.token_urlsafe(32)
    db.add(ApiToken(user_id=user.id, token_hash=hash_token(token), label=label, created_at=time.time()))
    return token


def user_for_token(db: Session, token: str) -> User | None:
    row = db.execute(select(ApiToken).where(ApiToken.token_hash == hash_token(token))).scalar()
    return None if row is None else row.user


_DUMMY_HASH: list[str] = []


def check_password(db: Session, name: str, password: str) -> User | None:
    """The user if the password matches. An unknown name costs one hash check too, so the answer
    time does not tell which user names exist."""
    user = db.execute(select(User).where(User.name == name)).scalar()
    if user is None or not user.password_hash:
        if not _DUMMY_HASH:
            _DUMMY_HASH.append(generate_password_hash(secrets.token_hex(8)))
        check_password_hash(_DUMMY_HASH[0], password)
        return None
    return user if check_password_hash(user.password_hash, password) else None


def current_user(db: Session, *, allow_session: bool) -> User | None:
    """The caller: a bearer token always; the login session only where ``allow_session`` (no CSRF risk)."""
    if "user" in g:
        return g.user
    user = None
    header = request.headers.get("Authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("Authorization header must be 'Bearer <token>'", field="Authorization")
        user = user_for_token(db, token.strip())
        if user is None:
            raise Unauthorized("invalid API token", field="Authorization")
    elif allow_session and session.get("user_id") is not None:
        user = db.get(User, session["user_id"])
    g.user = user
    return user


def require_user(db: Session, *, allow_session: bool = False) -> User:
    user = current_user(db, allow_session=allow_session)
    if user is None:
        how = "a bearer token or a login session" if allow_session else "a bearer token"
        raise Unauthorized(f"authentication required: {how}", field="Authorization")
    return user


def check_owner(user: User, res: Reservation) -> None:
    """Users manage their own reservations; admins manage all."""
    if not user.is_admin and res.owner_id != user.id:
        raise Forbidden(f"reservation {res.id} belongs to another user", field="id")
