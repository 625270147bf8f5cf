"""HTML forms (Flask-WTF: every POST form carries a CSRF token)."""
from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    DateTimeField,
    DateTimeLocalField,
    FloatField,
    IntegerField,
    PasswordField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import DataRequired, Length, NumberRange, Optional, Regexp
from wtforms.widgets import TextInput

from app.web.validation import ENDPOINT_RE, MAX_BANDWIDTH, MIN_BANDWIDTH

#: The API's bandwidth rule, with its message, so the form refuses exactly what the API refuses.
_BANDWIDTH_RANGE = NumberRange(min=MIN_BANDWIDTH, max=MAX_BANDWIDTH,
                               message=f"bandwidth must be at least {MIN_BANDWIDTH:g} Mbit/s and at most {MAX_BANDWIDTH:g}")


class MbpsField(FloatField):
    """A bandwidth input that shows ``6``, not ``6.0``, and keeps every digit of ``2.5`` or ``0.125``."""

    def _value(self) -> str:
        if self.raw_data:
            return self.raw_data[0]
        return "" if self.data is None else f"{self.data:.12g}"


class UtcMinuteField(DateTimeField):
    """A UTC time typed as text and shown as ``2026-11-27 19:11``, the way the rest of the page writes
    times: a ``datetime-local`` input is shown in the browser's locale (``11/27/2026, 07:11 PM``)
    next to UTC times. ``T`` between date and time is accepted too (what such an input sent)."""

    def __init__(self, label: str, **kwargs) -> None:  # noqa: ANN003
        kwargs.setdefault("render_kw", {"placeholder": "YYYY-MM-DD HH:MM", "inputmode": "numeric"})
        super().__init__(label, format=["%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"], widget=TextInput(), **kwargs)


class LoginForm(FlaskForm):
    username = StringField("User", validators=[DataRequired(), Length(max=64)])
    password = PasswordField("Password", validators=[DataRequired()])


class ActionForm(FlaskForm):
    """An empty form: commit / cancel / logout buttons only need the CSRF token."""


class ReservationForm(FlaskForm):
    name = StringField("Name", validators=[DataRequired(), Length(max=128)])
    description = TextAreaField("Description", validators=[Optional(), Length(max=4000)])
    src = StringField("Source port", validators=[DataRequired(), Regexp(ENDPOINT_RE, message="SWITCH:PORT, e.g. A:1")])
    src_vlan = IntegerField("Source VLAN", validators=[Optional(), NumberRange(1, 4094)])
    dst = StringField("Destination port",
                      validators=[DataRequired(), Regexp(ENDPOINT_RE, message="SWITCH:PORT, e.g. C:3")])
    dst_vlan = IntegerField("Destination VLAN", validators=[Optional(), NumberRange(1, 4094)])
    bandwidth = MbpsField("Bandwidth (Mbit/s)", validators=[DataRequired(), _BANDWIDTH_RANGE])
    start = DateTimeLocalField("Start (UTC)", format="%Y-%m-%dT%H:%M", validators=[Optional()])
    end = DateTimeLocalField("End (UTC)", format="%Y-%m-%dT%H:%M", validators=[DataRequired()])
    mode = SelectField("Mode", choices=["static", "elastic"], default="static")
    protection = SelectField("Protection (1+1: also a fibre-disjoint path, the ingress switch fails over by itself)",
                             choices=["none", "1+1"], default="none")
    ero = StringField("Explicit route (optional, node ids separated by spaces)", validators=[Optional(), Length(max=2000)])


class ModifyForm(FlaskForm):
    """Change a reservation's bandwidth and/or end time (re-checked by admission control)."""

    bandwidth = MbpsField("Bandwidth (Mbit/s)", validators=[Optional(), _BANDWIDTH_RANGE])
    end = UtcMinuteField("End (UTC)", validators=[Optional()])
