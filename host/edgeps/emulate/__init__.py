"""The event-loop emulator: thousands of MQTT sensors from one loop per process.

`edgeps emulate` runs each emulated sensor as its own MQTT connection (its own
client id) with the shared ``Worker`` of ``edgeps_worker.worker`` driven by
events (its step API: ``start_link``, ``feed``, ``run_timers``, ``leave``)
instead of its blocking ``run()``. One selector loop per process watches every
paho socket (paho's external-loop API); emulated compute and link delays are
timers, never sleeps. See `edgeps.emulate.loop` and `edgeps.emulate.runner`.
"""
