"""What the whole system shares.

The error root, the limits and specs, run messages and statuses, and the typed progress
events. Depends on nothing else in Baton but `tracing`.
"""
