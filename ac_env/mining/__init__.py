"""Bug-fix tasks mined from real Python libraries (``ac-env tasks build``), in the spirit of
SWE-smith's procedural bug injection.

A library's sdist (from PyPI, or a local archive) is unpacked into a one-commit git repo; its
suite runs at baseline in the local sandbox with Debian's ``/usr/bin/python3`` and apt's
pytest (so a task needs nothing else: libraries whose tests import other packages are
refused); the built-in suite's mutation operators put candidate bugs into public functions;
a mutant that breaks between one and ``max_failing`` tests while the rest pass becomes a task
with its own one-commit snapshot, a gold patch, and a problem statement written from the
failing test. See ``build`` for the directory layout and resumption.
"""

from __future__ import annotations

from ac_env.mining.build import BuildOptions, LibraryReport, build, build_library

__all__ = ["BuildOptions", "LibraryReport", "build", "build_library"]
