import sys

from crondepot.cli import main

sys.exit(main())
