"""The refusal: the 429 page (or its JSON) and the fields it sends again."""
