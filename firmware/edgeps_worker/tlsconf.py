"""TLS for the board's MQTT link: a client context from the config's CA file."""

import ssl
from binascii import a2b_base64


def tls_context(ca_path):
    """A TLS client context that trusts the CA in ``ca_path`` (PEM or DER).

    MicroPython's mbedtls takes the CA as DER, so a PEM file is decoded here.
    ValueError names the file when it cannot be used.
    """
    try:
        with open(ca_path, "rb") as f:
            ca = f.read()
        if ca.startswith(b"-----BEGIN"):
            ca = a2b_base64(b"".join(ca.split(b"-----")[2].split()))
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        # MicroPython's default for clients is CERT_NONE
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=ca)
    except (OSError, ValueError, IndexError) as exc:
        raise ValueError("tls_ca " + ca_path + ": " + str(exc)) from None
    return ctx
