"""Serving Attention Lab to a course: several app processes behind HAProxy (python -m deploy.course)."""
