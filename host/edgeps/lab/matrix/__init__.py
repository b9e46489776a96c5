"""The policy matrix of `edgeps bench policies`: every policy in every scenario in the
simulator (``grid``), its table and goals (``report``, ``cli``, ``goals``)."""
