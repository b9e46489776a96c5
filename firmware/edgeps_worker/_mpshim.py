"""Stand-ins for MicroPython's code-emitter decorators, so kernels run on CPython."""


def native(f):
    """No-op: CPython has no native emitter."""
    return f


def viper(f):
    """No-op: CPython has no viper emitter."""
    return f


def const(x):
    """Identity, like micropython.const outside the compiler."""
    return x
