"""`scaling --version`: the package's version, the one pyproject.toml reads (scaling.__version__)."""

import subprocess
import sys
from importlib import metadata

import scaling


def test_version_prints_the_package_version():
    out = subprocess.run([sys.executable, "-m", "scaling", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout == f"scaling {scaling.__version__}\n"
    assert scaling.__version__ == metadata.version("scaling")     # the installed metadata agrees
