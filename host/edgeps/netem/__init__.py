"""Link emulation: slow links as pure logic, the shaping TCP proxy, impairments, flags.

``shaping`` prices bytes on a link (token bucket, delay, TCP-style loss) for the
simulator and the proxy alike; ``shaper`` is the proxy that emulated sensors'
real MQTT bytes cross; ``impair`` delays and drops a worker's publishes;
``links`` gives worker profiles their shapes; ``sensor_links`` gives each
emulated sensor its proxy port; ``units`` and ``flags`` read link figures.
"""
