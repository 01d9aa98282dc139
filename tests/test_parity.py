"""docs/ops_parity.md is what scripts/ops_parity.py makes from the registry now."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_parity_doc_is_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "ops_parity.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
