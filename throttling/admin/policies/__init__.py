"""The admin of policies: policies with their windows and tiers, member overrides, what an algorithm means."""
