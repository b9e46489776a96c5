"""Plain fixed-width text tables, as the commands and benchmarks print them."""

from __future__ import annotations


def table(header: list[str], rows: list[list[str]]) -> str:
    """Plain fixed-width table, first column left-aligned, the rest right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        parts = [
            c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
            for i, c in enumerate(cells)
        ]
        return "  ".join(parts)

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(r) for r in rows)])
