"""Repositories: queries and row changes inside a caller's transaction.

They never commit; the service layer owns the transaction.
"""
