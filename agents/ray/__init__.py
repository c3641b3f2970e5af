"""Ray shells around the runtime: agent actors, the run ledger actor and its client, the pool.

Nothing is imported here: the ledger actor's process must not import litellm through the
agent actor's module.
"""
