"""Controller roles for OpenFlow 1.0: Nicira's NXT_ROLE_REQUEST / NXT_ROLE_REPLY and mlte's generation id.

Why: an OTS agent connects to every controller listed (as Open vSwitch does); the roles decide which
of them may change the switch. Wire format (docs/ots.md, "Several controllers and roles")::

    ofp_header (type OFPT_VENDOR) | vendor u32 = 0x00002320 | subtype u32 (10 request, 11 reply) | role u32
        20 bytes: Nicira's message, as Open vSwitch and os-ken's NXTRoleRequest encode it
    ... | role u32 | 4 zero bytes | generation_id u64
        32 bytes: mlte's extension (Nicira's request has no generation id; OpenFlow 1.3's has)

Roles: OTHER (0, full access, the default), MASTER (1, full access; one at a time), SLAVE (2, reads
only). :class:`Roles` is the switch's bookkeeping (Open vSwitch's ``connmgr``): one role per session,
one switch-wide generation id. Plain functions, no sockets: the agent calls them, tests check them.
Controller side: :func:`request` builds the os-ken message, :func:`parse_reply` reads the answer.
"""
from __future__ import annotations

import struct
import threading
from dataclasses import dataclass
from typing import Any

from os_ken.lib.pack_utils import msg_pack_into
from os_ken.ofproto import nicira_ext
from os_ken.ofproto import ofproto_v1_0 as ofp
from os_ken.ofproto import ofproto_v1_0_parser as parser

NX_VENDOR_ID = 0x00002320
NXT_ROLE_REQUEST, NXT_ROLE_REPLY = nicira_ext.NXT_ROLE_REQUEST, nicira_ext.NXT_ROLE_REPLY  # 10, 11
OTHER, MASTER, SLAVE = nicira_ext.NX_ROLE_OTHER, nicira_ext.NX_ROLE_MASTER, nicira_ext.NX_ROLE_SLAVE  # 0, 1, 2
NAMES = {OTHER: "other", MASTER: "master", SLAVE: "slave"}
BY_NAME = {"other": OTHER, "equal": OTHER, "master": MASTER, "slave": SLAVE}

NICIRA_HEADER = struct.Struct("!II")  # vendor, subtype (after the ofp_header)
PLAIN_LEN = 20  # Nicira's role message
GENERATION_LEN = 32  # with mlte's generation id
_ROLE = struct.Struct("!I")
_ROLE_GEN = struct.Struct("!I4xQ")
_HALF = 1 << 63
_MASK = (1 << 64) - 1

#: OF1.0 error code (type OFPET_BAD_REQUEST) for a role outside 0..2: Open vSwitch's NX1.0 encoding
#: of OFPRRFC_BAD_ROLE.
NXBRC_BAD_ROLE = 513


class RoleFormatError(ValueError):
    """A role message of the wrong length (answered with BAD_REQUEST / BAD_LEN)."""


@dataclass(frozen=True)
class RoleMessage:
    """A decoded NXT_ROLE_REQUEST or NXT_ROLE_REPLY; ``generation_id`` None = Nicira's plain form."""

    subtype: int
    role: int
    generation_id: int | None = None


def is_role_message(raw: bytes) -> bool:
    """True for a Nicira VENDOR message whose subtype is a role request or reply."""
    if len(raw) < ofp.OFP_HEADER_SIZE + NICIRA_HEADER.size or raw[1] != ofp.OFPT_VENDOR:
        return False
    vendor, subtype = NICIRA_HEADER.unpack_from(raw, ofp.OFP_HEADER_SIZE)
    return vendor == NX_VENDOR_ID and subtype in (NXT_ROLE_REQUEST, NXT_ROLE_REPLY)


def decode(raw: bytes) -> RoleMessage:
    """Decode a role request or reply (raw bytes, whole message); RoleFormatError on a bad length."""
    length = struct.unpack_from("!H", raw, 2)[0] if len(raw) >= 4 else len(raw)
    if length != len(raw) or length not in (PLAIN_LEN, GENERATION_LEN):
        raise RoleFormatError(f"role message of {len(raw)} bytes, must be {PLAIN_LEN} or {GENERATION_LEN}")
    _, subtype = NICIRA_HEADER.unpack_from(raw, ofp.OFP_HEADER_SIZE)
    body = ofp.OFP_HEADER_SIZE + NICIRA_HEADER.size
    if length == PLAIN_LEN:
        return RoleMessage(subtype, _ROLE.unpack_from(raw, body)[0])
    role, generation = _ROLE_GEN.unpack_from(raw, body)
    return RoleMessage(subtype, role, generation)


def encode(subtype: int, xid: int, role: int, generation_id: int | None = None) -> bytes:
    """The bytes of a role request or reply (the generation id makes it mlte's 32-byte form)."""
    body = _ROLE.pack(role) if generation_id is None else _ROLE_GEN.pack(role, generation_id & _MASK)
    payload = NICIRA_HEADER.pack(NX_VENDOR_ID, subtype) + body
    return struct.pack(ofp.OFP_HEADER_PACK_STR, ofp.OFP_VERSION, ofp.OFPT_VENDOR,
                       ofp.OFP_HEADER_SIZE + len(payload), xid) + payload


def older(generation_id: int, than: int) -> bool:
    """True if ``generation_id`` comes before ``than`` in 64-bit serial arithmetic (Open vSwitch's
    and OpenFlow 1.3's rule: the difference, read as a signed 64-bit number, is negative)."""
    return (generation_id - than) & _MASK >= _HALF


# --- the switch's bookkeeping ------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """What a role request did: ``stale`` = refused (the session was made SLAVE, mlte's fencing);
    otherwise ``role`` is the session's new role and ``demoted`` the sessions moved MASTER -> SLAVE."""

    role: int
    generation_id: int | None
    stale: bool = False
    demoted: tuple[int, ...] = ()


class Roles:
    """The role of every upstream session and the highest generation id seen (thread-safe).

    A new session is OTHER. A MASTER request demotes every other MASTER to SLAVE. A MASTER or SLAVE
    request carrying a generation id older than the highest seen is stale: refused, and (mlte's
    fencing, which Open vSwitch does not do) the session becomes SLAVE, so a deposed leader whose
    session came back cannot write as OTHER. An OTHER request never checks the generation (as in OF1.3).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._roles: dict[int, int] = {}
        self.generation_id: int | None = None

    def add(self, session: int) -> None:
        with self._lock:
            self._roles[session] = OTHER

    def remove(self, session: int) -> None:
        with self._lock:
            self._roles.pop(session, None)

    def role(self, session: int) -> int:
        with self._lock:
            return self._roles.get(session, OTHER)

    def may_change(self, session: int) -> bool:
        """True unless the session is a SLAVE (OTHER and MASTER may change the switch)."""
        return self.role(session) != SLAVE

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(self._roles)

    def request(self, session: int, role: int, generation_id: int | None) -> Decision:
        """Apply a role request (``role`` already checked to be OTHER, MASTER or SLAVE)."""
        with self._lock:
            if role != OTHER and generation_id is not None:
                if self.generation_id is not None and older(generation_id, self.generation_id):
                    self._roles[session] = SLAVE
                    return Decision(SLAVE, self.generation_id, stale=True)
                self.generation_id = generation_id
            demoted: list[int] = []
            if role == MASTER:
                demoted = [s for s, r in self._roles.items() if r == MASTER and s != session]
                for s in demoted:
                    self._roles[s] = SLAVE
            self._roles[session] = role
            return Decision(role, self.generation_id, demoted=tuple(demoted))


# --- controller side (os-ken messages) ----------------------------------------------------------


class NXTRoleRequestGeneration(parser.NXTRoleRequest):
    """os-ken's NXTRoleRequest with mlte's generation id (32 bytes on the wire)."""

    def __init__(self, datapath: Any, role: int, generation_id: int) -> None:
        super().__init__(datapath, role)
        self.generation_id = generation_id

    def _serialize_body(self) -> None:
        self.serialize_header()
        msg_pack_into(_ROLE_GEN.format, self.buf, nicira_ext.NICIRA_HEADER_SIZE, self.role,
                      self.generation_id & _MASK)


def request(datapath: Any, role: int, generation_id: int | None = None) -> Any:
    """An os-ken NXT_ROLE_REQUEST (``generation_id`` given: mlte's 32-byte form)."""
    if role not in NAMES:
        raise ValueError(f"role must be OTHER (0), MASTER (1) or SLAVE (2), got {role!r}")
    if generation_id is None:
        return parser.NXTRoleRequest(datapath, role)
    if not 0 <= generation_id <= _MASK:
        raise ValueError(f"generation id must fit in 64 bits, got {generation_id}")
    return NXTRoleRequestGeneration(datapath, role, generation_id)


def parse_reply(msg: Any) -> RoleMessage | None:
    """The NXT_ROLE_REPLY in an os-ken OF1.0 message (``ev.msg`` of EventOFPVendor) or raw bytes;
    None if it is not one (e.g. the OTS capabilities reply)."""
    raw = msg if isinstance(msg, (bytes, bytearray)) else getattr(msg, "buf", None)
    if not isinstance(raw, (bytes, bytearray)) or not is_role_message(bytes(raw)):
        return None
    try:
        decoded = decode(bytes(raw))
    except RoleFormatError:
        return None
    return decoded if decoded.subtype == NXT_ROLE_REPLY else None
