"""The capacity planner of `edgeps plan`: the arithmetic (``capacity``), its measured
costs (``costs``, ``curve``) and how they are measured (``calibrate``, ``job``)."""
