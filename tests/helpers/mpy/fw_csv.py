"""Exercise the board's CSV readers (argv: a CSV dir); prints what each file gives."""

import sys
from array import array

from edgeps_worker import csvtext, datafile

d = sys.argv[1]


def show(name, *, names=None, classes=False, kind=0):
    try:
        ring = datafile.load_csv(d + "/" + name, 2, 16, kind, 3)
        if classes:
            ring.set_classes(names)
        X = array("f", bytes(4 * 2 * 4))
        y = array("i" if kind == 0 else "f", bytes(4 * 4))
        got = ring.batch(X, y, 4)
        pairs = sorted(set((ring.X[2 * i], ring.y[i]) for i in range(ring.size)))
        print(name, ring.size, got, pairs, ring.classes)
    except ValueError as exc:
        print(name, "error", exc)


show("header_text.csv")
show("header_text.csv", names=b"dog\ncat\nbird", classes=True)
show("header_text.csv", names=b"dog\nbird", classes=True)
show("header_ids.csv")
show("label_only_header.csv")
show("once.csv")
show("mixed.csv")
show("quoted.csv", names=b"b\na", classes=True)
show("target.csv", kind=1)
show("bad_cell.csv")
show("missing.csv")
rows = csvtext.CsvRows(d + "/infer.csv", 2)
x = array("f", [0.0, 0.0])
out = []
try:
    while True:
        rows.read(x)
        out.append((x[0], x[1]))
except StopIteration:
    pass
rows.close()
print("infer", out)
