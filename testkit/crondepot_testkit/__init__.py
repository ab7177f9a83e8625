"""Development-side support shared by crondepot's tests (``tests/``) and benchmarks
(``bench/``). Not part of the product API: crondepot never imports it, and it changes with
the tests and benchmarks that use it.

It sits in ``src/`` beside crondepot, so the editable install (``make install``) puts it on
the path of pytest and of ``python bench/<name>.py`` alike, with no ``sys.path`` edits.
What only the tests use stays in ``tests/support/``.
"""
