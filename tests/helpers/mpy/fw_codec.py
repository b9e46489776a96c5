"""Board codecs on given inputs: argv mode n in.bin out.bin [chunk].

mode "feedback": in.bin is one gradient, encoded as I8 argv[5] times with
the residual kept as argv[6] (f32, i8), each body followed by the residual.
mode "encode": in.bin holds steps x n float32 gradients; for each step writes
the I8 UPDATE body (error feedback carried over), then the F16 body of the
same gradient, then the F32 body; after the last step the I8 residual.
A step whose gradient holds NaN/Inf writes the line "refused <step>" and
nothing for I8 (the residual must stay). mode "f16"/"i8": in.bin is an
encoded parameter vector, written to params chunk by chunk (chunk bytes, a
multiple of the record), then the decoded float32 vector to out.bin.
"""

import sys
from array import array

from edgeps_worker import codec, codec_read


def run(mode, n, raw, out):
    if mode == "encode":
        c = codec.GradCodec(n)
        g = array("f", bytes(4 * n))
        steps = len(raw) // (4 * n)
        for s in range(steps):
            for code in (codec.I8, codec.F16, codec.F32):
                g[:] = array("f", raw[4 * n * s : 4 * n * (s + 1)])
                try:
                    out.write(c.encode(code, g))
                except ValueError:
                    print("refused", s, code)
        for rb in c.residual:
            out.write(rb)
    elif mode == "feedback":
        # the same gradient every step: each step's I8 body and residual
        c = codec.GradCodec(n, sys.argv[6])
        g = array("f", bytes(4 * n))
        for _ in range(int(sys.argv[5])):
            g[:] = array("f", raw)
            out.write(c.encode(codec.I8, g))
            for rb in c.residual:
                out.write(rb)
    else:
        code = codec.F16 if mode == "f16" else codec.I8
        chunk = int(sys.argv[5])
        params = array("f", bytes(4 * n))
        mv = memoryview(raw)
        for off in range(0, len(raw), chunk):
            codec_read.write_params(params, code, off, mv[off : off + chunk])
        out.write(params)


with open(sys.argv[3], "rb") as f:
    data = f.read()
with open(sys.argv[4], "wb") as f:
    run(sys.argv[1], int(sys.argv[2]), data, f)
print("ok")
