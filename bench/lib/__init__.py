"""What the bench's entry points (bench/*.py) share: measuring, the scenarios, the report.

An entry point runs as `python bench/run.py` (or another bench/*.py), so bench/ is first on sys.path; these
are imported as `from lib import measure`. The servers the bench starts are in bench/servers/.
"""

from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
SERVERS_DIR = BENCH_DIR / "servers"
LIB_DIR = BENCH_DIR / "lib"
