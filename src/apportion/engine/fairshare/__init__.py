"""Entitlements (SPEC section 4): who is entitled to how much of a pool.

- ``demand``: the demand book kept per pool and team, and ``entitlements()``;
- ``buckets``: reserved demand served from the reservation buckets (4.1-4.2);
- ``reserved``: reserved demand beyond the leaves' own buckets;
- ``fill``: water-filling of surplus by bursting priority under caps (4.3).
"""
