"""A board's view of per-device keys, under MicroPython.

Usage: micropython fw_keys.py MASTER_HEX WORKER_ID WORKER_KEY_HEX MESSAGE_HEX

Prints three lines: ``derived <hex>`` (the worker key the board's own
hmac_sha256 derives from the master), ``tag <hex>`` (its HMAC-SHA256 of the
message under the worker key it was given, as a board holding only its own
key computes it) and ``heartbeat <hex>`` (a HEARTBEAT signed with that key).
"""

import sys
from binascii import hexlify, unhexlify

from edgeps_worker import wire

LABEL = b"edgeps-worker-key\x00"


def main(argv):
    master = unhexlify(argv[1])
    wid = argv[2]
    own_key = unhexlify(argv[3])
    message = unhexlify(argv[4])
    derived = wire.hmac_sha256(master, LABEL + wid.encode())
    print("derived", hexlify(derived).decode())
    print("tag", hexlify(wire.hmac_sha256(own_key, message)).decode())
    hb = wire.encode_heartbeat("lab", wid, 7, 3, key=own_key)
    print("heartbeat", hexlify(hb).decode())


main(sys.argv)
