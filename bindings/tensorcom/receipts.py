"""tensorcom.receipts: confirmed delivery for receivers built on pyzmq.

A tensorcom server pushing batches with metadata (``--meta`` over
``zpush``/``zrpush``) keeps each batch until a receiver confirms it, sends
again what a lost connection may have dropped, and fails at the end if a
batch was never confirmed (docs/deploy.md, "Delivery"). tensorcom's
Connection (C++ and Python) confirms by itself. A receiver of your own, on a
pyzmq PULL socket, confirms with this module (pure Python, needs pyzmq)::

    receipts = tensorcom.receipts.Receipts()
    frames = pull.recv_multipart(copy=False)
    meta = msgpack.unpackb(...)            # the batch's "meta" tensor
    if receipts.take(meta, frames[0].get("Peer-Address")):
        train(...)                          # False: a copy already taken
    ...
    receipts.close()

or serve with ``--unconfirmed`` (batches then go as PUSH sends them: lost
with a connection, never twice).
"""

import ipaddress
import re
import struct
from typing import Any, Dict, Mapping, Optional, Set, Tuple

_IPC_NAME = re.compile(r"@tensorcom-receipt-[0-9a-f]{16}")
_REMEMBERED = 1 << 16  # sequences remembered a run: as the C++ receiver


class Receipts:
    """Sends the receipts a batch's metadata asks for, and spots copies.

    The bounds are those of tensorcom's own receivers: the host of a tcp
    receipt address is where the batch came from (never the metadata's
    word), ipc receipts go only to tensorcom's abstract socket names, at
    most 64 senders get receipts.
    """

    MAX_SENDERS = 64

    def __init__(self, context: Optional[Any] = None) -> None:
        import zmq

        self._zmq = zmq
        self._context = context or zmq.Context.instance()
        self._sockets: Dict[Tuple[str, str], Any] = {}
        self._taken: Dict[int, Set[int]] = {}

    def take(self, meta: Mapping[str, Any], peer_address: Optional[str] = None) -> bool:
        """Confirms the batch `meta` describes, if it asks to be. Returns
        False for a copy of a batch taken before (drop it), else True.
        peer_address: the first frame's "Peer-Address" (pyzmq:
        ``frame.get("Peer-Address")``, received with ``copy=False``)."""
        run, sequence = meta.get("run"), meta.get("seq")
        if not isinstance(run, int) or not isinstance(sequence, int) or "ack" not in meta:
            return True
        taken = self._taken.setdefault(run, set())
        first = sequence not in taken
        if first:
            taken.add(sequence)
            if len(taken) > _REMEMBERED:
                taken.discard(min(taken))
        socket = self._socket(meta, _ip_or_nothing(peer_address))
        if socket is not None:
            try:
                socket.send(struct.pack("<QQ", run, sequence), self._zmq.NOBLOCK)
            except self._zmq.Again:
                pass  # as a lost receipt: the sender sends the batch again
        return first

    def close(self) -> None:
        for socket in self._sockets.values():
            socket.close(linger=200)
        self._sockets.clear()

    def _socket(self, meta: Mapping[str, Any], peer_address: str) -> Optional[Any]:
        endpoint = _endpoint(meta.get("ack") or [], peer_address)
        if endpoint is None:
            return None
        key = (endpoint, str(meta.get("ackkey", "")))
        if key in self._sockets:
            return self._sockets[key]
        if len(self._sockets) >= self.MAX_SENDERS:
            return None
        zmq = self._zmq
        socket = self._context.socket(zmq.PUSH)
        socket.setsockopt(zmq.SNDHWM, 10000)
        socket.setsockopt(zmq.IPV6, 1)
        if key[1]:
            public, secret = zmq.curve_keypair()
            socket.curve_serverkey = key[1].encode()
            socket.curve_publickey = public
            socket.curve_secretkey = secret
        socket.connect(endpoint)
        self._sockets[key] = socket
        return socket


def _ip_or_nothing(peer_address: Optional[str]) -> str:
    """The peer's IP address; "" for ipc peers, whose "Peer-Address" is
    their credentials ("localhost:UID:GID:PID")."""
    try:
        return str(ipaddress.ip_address(peer_address or ""))
    except ValueError:
        return ""


def _endpoint(addresses: Any, peer_address: str) -> Optional[str]:
    """The ZeroMQ endpoint of one of the receipt addresses, as the C++
    receiver picks it: over tcp the tcp one, else the ipc one."""
    for address in addresses if isinstance(addresses, list) else []:
        if not isinstance(address, str):
            continue
        if peer_address and address.startswith("tcp:"):
            port = address[4:]
            if port.isdigit() and 0 < int(port) < 65536:
                host = f"[{peer_address}]" if ":" in peer_address else peer_address
                return f"tcp://{host}:{int(port)}"
        if not peer_address and address.startswith("ipc:") and _IPC_NAME.fullmatch(address[4:]):
            return "ipc://" + address[4:]
    return None
