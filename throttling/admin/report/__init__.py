"""The penalty report: queries, chart geometry and views apart."""

from .views import urls

__all__ = ["urls"]
