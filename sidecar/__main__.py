import sys

from sidecar.cli import main

sys.exit(main())
