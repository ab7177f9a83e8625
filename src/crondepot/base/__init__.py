"""Leaf modules every layer may import: the error tree (``errors``), the closed sets and name
patterns (``vocab``), JSON text (``jsontext``) and lazy package exports (``lazy``).
"""
