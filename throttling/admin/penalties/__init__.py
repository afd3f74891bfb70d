"""The admin of penalties: the list, a member's history, lifting, the ladder."""
