"""JSON(): the current program's plan (MSCCL++'s general.py)."""

from .program import JSON  # noqa: F401
