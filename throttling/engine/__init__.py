"""The engine: who is acting, which policy applies, and the decision itself (one Redis script call)."""
