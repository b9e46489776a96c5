"""Board entry point: ``micropython main.py [config.json]`` (the ESP32 runs it at boot).

boot.py has brought Wi-Fi up on an ESP32; everything else is in
edgeps_worker.app, so a precompiled board keeps almost no source to compile.
A finished board stays at the REPL (a SystemExit would soft-reset it); the
unix port exits with main's status.
"""

import sys

from edgeps_worker.app import finish, main

if __name__ == "__main__":
    finish(main(sys.argv))
