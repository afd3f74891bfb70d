"""What a limit would have done: a policy, or a draft of one, replayed over the site's own history, and suggested limits."""
