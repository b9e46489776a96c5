"""The lab: benchmarks, the capacity planner and the policy matrix.

It sits above the product and imports it; nothing in the product imports the
lab. ``edgeps bench NAME`` runs a benchmark of ``lab.bench`` or ``lab.matrix``;
``edgeps plan`` prints what ``lab.plan`` computes.
"""
