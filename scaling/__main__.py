import sys

from scaling.cli import main

sys.exit(main())
