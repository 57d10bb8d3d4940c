import sys

from deepvm.cli import main

sys.exit(main())
