import sys

from edgeps.cli import main

sys.exit(main())
