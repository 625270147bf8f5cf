"""Errors the web service turns into JSON ``{"error": {"status", "field", "message", ...}}``."""
from __future__ import annotations

from typing import Any

from app.errors import MlteError


class ApiError(MlteError):
    """A rejected request: HTTP status, the offending field (if any) and a clear message."""

    status = 400

    def __init__(self, message: str, *, field: str | None = None, status: int | None = None,
                 **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        if status is not None:
            self.status = status
        self.extra = extra

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"status": self.status, "message": self.message, "field": self.field}
        body.update(self.extra)
        return {"error": body}


class NotFound(ApiError):
    status = 404


class Conflict(ApiError):
    status = 409


class Unauthorized(ApiError):
    status = 401


class Forbidden(ApiError):
    status = 403
