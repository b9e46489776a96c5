"""Check the golden wire vectors under MicroPython: prints 'ok NAME' per vector.

Usage: micropython wire_golden.py path/to/wire_vectors.json
"""

import json
import struct
import sys

from edgeps_worker import wire_host as wire


def vector_data(v):
    if "data_f32" in v:
        floats = v["data_f32"]
        return struct.pack(f"<{len(floats)}f", *floats)
    if "data_hex" in v:
        return bytes.fromhex(v["data_hex"])
    return None


def vector_call(v):
    kwargs = dict(v["kwargs"])
    for name in ("dtypes", "codecs"):
        if name in kwargs:
            kwargs[name] = tuple(kwargs[name])
    data = vector_data(v)
    if data is not None:
        kwargs["data"] = data
    if "key" in v:
        kwargs["key"] = bytes.fromhex(v["key"])
    if "digest" in v:
        kwargs["digest"] = bytes.fromhex(v["digest"])
    out = getattr(wire, v["call"])(*v["args"], **kwargs)
    return out if isinstance(out, list) else [out]


def plain(x):
    # tuples as lists, as JSON holds them (HELLO's moments, WELCOME's card)
    return [plain(i) for i in x] if isinstance(x, (tuple, list)) else x


def check(v):
    got = vector_call(v)
    want = [bytes.fromhex("".join(seg[1] for seg in chunk)) for chunk in v["chunks"]]
    if len(got) != len(want):
        return f"chunk count {len(got)} != {len(want)}"
    for i in range(len(want)):
        if got[i] != want[i]:
            return f"chunk {i}: {got[i].hex()} != {want[i].hex()}"
    key_hex = v.get("key", v.get("decode_key"))
    msg = wire.decode(want[0], key=bytes.fromhex(key_hex) if key_hex else None)
    for name, value in v["fields"].items():
        if plain(getattr(msg, name)) != value:
            return f"field {name}: {getattr(msg, name)!r} != {value!r}"
    if bytes(getattr(msg, "digest", b"")) != bytes.fromhex(v.get("digest", "")):
        return "digest differs"
    data = vector_data(v)
    if data is not None:
        r = wire.Reassembler(max_bytes=1024, max_age=10, max_pending=2)
        whole = None
        for c in reversed(want):
            whole = r.add(wire.decode(c), 0) or whole
        if bytes(whole.data) != data:
            return "reassembled data differs"
    return None


def check_typed_target():
    """PARAMS chunks land straight in a board's array('f'), in any order."""
    from array import array

    from edgeps_worker.params_sink import ParamsSink

    values = [i * 0.5 - 3.0 for i in range(50)]
    chunks = wire.encode_params("j", "w", 9, 8, 4, array("f", values), max_chunk=96)
    target = array("f", [0.0] * 50)
    sink = ParamsSink(target, 200)
    whole = None
    for c in chunks[1:] + chunks[:1]:
        whole = sink.add(wire.decode(c), wire.DTYPE_F32) or whole
    if len(chunks) < 3 or whole is not True:
        return "not reassembled"
    if list(target) != values:
        return "values differ"
    return None


def check_shared_release():
    """A RELEASE first, then its shared copy backwards: held once, digest checked."""
    from array import array
    from hashlib import sha256

    from edgeps_worker.params_sink import ParamsSink

    values = [i * 0.25 - 2.0 for i in range(50)]
    raw = struct.pack("<50f", *values)
    key = b"worker key"
    rel = wire.encode_release("j", "w", 9, 8, 4, sha256(raw).digest()[:16], 2, 0, key)
    shared = wire.encode_shared_params("j", 9, 4, raw, max_chunk=96)
    target = array("f", [0.0] * 50)
    sink = ParamsSink(target, 200)
    got = [sink.add(wire.decode(rel, key))]
    got += [sink.add(wire.decode(c, key)) for c in reversed(shared)]
    got.append(sink.add(wire.decode(rel, key)))  # a QoS 1 redelivery
    if got.count(True) != 1 or got[-2] is not True or sink.done != (4, 2, 0):
        return "results " + repr(got)
    if list(target) != values:
        return "values differ"
    return None


def main():
    vectors = []
    for path in sys.argv[1:]:
        with open(path) as f:
            vectors += json.load(f)["vectors"]
    bad = 0
    for v in vectors:
        err = check(v)
        if err is None:
            print("ok", v["name"])
        else:
            bad += 1
            print("FAIL", v["name"], err)
    err = check_typed_target()
    if err is None:
        print("ok into_array")
    else:
        bad += 1
        print("FAIL into_array", err)
    err = check_shared_release()
    if err is None:
        print("ok shared_release")
    else:
        bad += 1
        print("FAIL shared_release", err)
    print("done", len(vectors), "vectors,", bad, "failed")
    sys.exit(1 if bad else 0)


main()
