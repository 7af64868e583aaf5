"""Shim so that `pip install -e .` works with older pip; metadata lives in setup.cfg."""
import setuptools

setuptools.setup()
