"""CSV text on a board: a line's cells, the header rule, and rows in order.

The rules follow the host's reader (``edgeps.model.table``), so a file that
``edgeps worker --data`` takes is taken here too: '#' lines and empty lines
are skipped, cells may be quoted, the first row is a header when none of its
feature cells is a number (and refused when some are and some are not).
Training boards read a CSV through ``datafile`` (which adds the labels);
inference mode reads its rows in order with ``CsvRows``. Loaded only by a
board whose data is a CSV, and by a training board only while it reads it.
"""

from array import array


def open_text(path):
    """The file at ``path`` for reading; ValueError naming it when it cannot be."""
    try:
        return open(path)
    except OSError as exc:
        if exc.args and exc.args[0] == 2:  # ENOENT
            raise ValueError("data file not found: " + path) from None
        raise ValueError(path + ": cannot open the data file: " + str(exc)) from None


def cells(line):
    """The cells of one CSV line, stripped (a cell in double quotes unquoted);
    None for a line to skip (empty, or a '#' comment)."""
    line = line.strip()
    if line and line[0] == "\ufeff":  # a byte order mark, as spreadsheets write
        line = line[1:].strip()
    if not line or line[0] == "#":
        return None
    out = []
    for c in line.split(","):
        c = c.strip()
        if len(c) > 1 and c[0] == '"' and c[-1] == '"':
            c = c[1:-1].strip()
        out.append(c)
    return out


def is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def where(path, lineno):
    return path + ":" + str(lineno) + ": "


def header_kind(row, n_features, path, lineno):
    """How the first row's feature cells read: "header" (all text), "data"
    (all numbers); ValueError when they are mixed."""
    text = 0
    for i in range(n_features):
        if not is_number(row[i]):
            text += 1
    if text == n_features:
        return "header"
    if text:
        raise ValueError(
            where(path, lineno) + "the first row has text in some feature cells "
            "and numbers in others: fix the cells, or make it a header of names"
        )
    return "data"


def features(row, n_features, xbuf, path, lineno):
    """The row's first n_features cells into ``xbuf`` as floats (finite)."""
    for i in range(n_features):
        try:
            v = float(row[i])
        except ValueError:
            raise ValueError(
                where(path, lineno)
                + "feature cell "
                + repr(row[i])
                + " is not a number"
            ) from None
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(where(path, lineno) + "features must be finite")
        xbuf[i] = v


def label(ring, cell, names, path, lineno):
    """A label cell as a class id (text: a name's id, in ``names``), or a target."""
    numeric = is_number(cell)
    if ring.label_kind != 0:
        if not numeric:
            raise ValueError(
                where(path, lineno) + "label " + repr(cell) + " is not a "
                "number; this model predicts a number"
            )
        return float(cell)
    if numeric and ring.classes is None:
        v = float(cell)
        if v != int(v):
            raise ValueError(
                where(path, lineno) + "label " + cell + " is not a class "
                "id (a whole number); this model predicts classes"
            )
        return int(v)
    if ring.classes is None and ring.size:
        raise ValueError(
            where(path, lineno) + "label " + repr(cell) + " is text where "
            "earlier rows have numbers: give every row a class name, or every "
            "row a class id"
        )
    if cell not in names:
        if len(names) >= 256:
            raise ValueError(path + ": more than 256 distinct labels")
        names.append(cell)
    ring.classes, ring.mapped = names, False
    return names.index(cell)


def fill(ring, path):
    """The rows of the CSV at ``path`` into ``ring`` (a ``datafile.CsvRing``):
    n_features cells and the label; a header skipped; text labels numbered
    in the order first seen (``ring.classes``)."""
    n_features, label_kind = ring.n_features, ring.label_kind
    row = array("f", bytes(4 * n_features))
    names = []
    first = None  # a first row whose label only is text: a header, or data?
    started = False
    with open_text(path) as f:
        lineno = 0
        for line in f:
            lineno += 1
            got = cells(line)
            if got is None:
                continue
            if len(got) != n_features + 1:
                raise ValueError(
                    where(path, lineno) + str(len(got)) + " values, expected "
                    + str(n_features + 1) + " values (" + str(n_features)
                    + " features, then the label)"
                )  # fmt: skip
            if not started:
                started = True
                if header_kind(got, n_features, path, lineno) == "header":
                    continue
                if not is_number(got[-1]) and label_kind == 0:
                    features(got, n_features, row, path, lineno)
                    first = (array("f", row), got[-1], lineno)
                    continue
            features(got, n_features, row, path, lineno)
            ring.add(row, label(ring, got[-1], names, path, lineno))
    if first is not None:
        x, name, lineno = first
        if name in names:  # data: its class appears again
            ring.add(x, names.index(name))
        elif ring.size == 0 or ring.classes is not None:
            raise ValueError(
                where(path, lineno) + "the first row has numbers for features "
                "and the label " + repr(name) + ", which no other row has: a "
                "header, or a data row of a class seen once? Name the label "
                "column with text, or drop the row"
            )
        # else every other label is a number: the first row was a header
    if ring.size == 0:
        raise ValueError(path + ": no samples")


class CsvRows:
    """The rows of a CSV in order, as a sensor's ``read(xbuf)`` (inference):
    n_features cells, or n_features and a label (ignored); a header is skipped."""

    def __init__(self, path, n_features):
        self.path, self.nf = path, n_features
        self.f = open_text(path)
        self.lineno = 0
        self.first = True

    def read(self, xbuf):
        """The next row into xbuf, then 0; StopIteration after the last."""
        nf = self.nf
        while True:
            line = self.f.readline()
            if not line:
                raise StopIteration
            self.lineno += 1
            row = cells(line)
            if row is None:
                continue
            if len(row) != nf and len(row) != nf + 1:
                raise ValueError(
                    where(self.path, self.lineno) + str(len(row)) + " values; the "
                    "model takes " + str(nf) + " features (and an optional label)"
                )
            if self.first:
                self.first = False
                if header_kind(row, nf, self.path, self.lineno) == "header":
                    continue
            features(row, nf, xbuf, self.path, self.lineno)
            return 0

    def close(self):
        self.f.close()
