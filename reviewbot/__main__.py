import sys

from reviewbot.cli import main

sys.exit(main())
