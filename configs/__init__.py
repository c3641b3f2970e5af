"""The example and default agent systems, and the demo tools they use."""
