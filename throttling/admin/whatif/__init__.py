"""The policy page's "What would this do?": the replay view and its figures."""
