"""HTML forms (Flask-WTF: every POST form carries a CSRF token)."""
from __future__ import annotations

from flask_wtf import FlaskForm
from wtforms import (
    DateTimeLocalField,
    FloatField,
    IntegerField,
    PasswordField,
    SelectField,
    StringField,
    TextAreaField,
)
from wtforms.validators import DataRequired, Length, NumberRange, Optional, Regexp

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
    ero = StringField("Explicit route (optional, node ids separated by spaces)", validators=[Optional(), Length(max=2000)])


class ModifyForm(FlaskForm):
    """Change a reservation's bandwidth and/or end time (re-checked by admission control)."""

    bandwidth = MbpsField("Bandwidth (Mbit/s)", validators=[Optional(), _BANDWIDTH_RANGE])
    end = DateTimeLocalField("End (UTC)", format="%Y-%m-%dT%H:%M", validators=[Optional()])
