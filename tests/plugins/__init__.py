"""Plug-ins that live only in the tests: the proof that a benchmark and a method are one module each."""
