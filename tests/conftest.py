"""Shared test configuration for stormish.

Keep this file minimal: fixtures that only one test module needs live in that module.
"""
