"""The decoding layer stays pure: importable with pyspark made unimportable."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_formats_import_without_pyspark() -> None:
    script = textwrap.dedent(
        """
        import importlib, pkgutil, sys

        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "pyspark" or name.startswith("pyspark."):
                    raise ImportError("pyspark is blocked in this test")
                return None

        sys.meta_path.insert(0, Block())
        import txn_audit.formats as formats
        names = [m.name for m in pkgutil.iter_modules(formats.__path__)]
        for name in names:
            importlib.import_module(f"txn_audit.formats.{name}")
        assert not any(m == "pyspark" or m.startswith("pyspark.") for m in sys.modules), "pyspark imported"
        print(len(names))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip()) >= 8  # every decoder module was actually imported
